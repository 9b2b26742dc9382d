package admin

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/internal/schedule"
	"github.com/tekrar/tekrar/views"
)

// recentRuns is how many runs the schedule page lists.
const recentRuns = 100

// schedulePage lists the scheduled tasks with their last runs, River's leader, and the
// recent runs of every task.
func (a *console) schedulePage(c *gin.Context) error {
	ctx := c.Request.Context()
	last, done, err := schedule.Last(ctx, a.DB.DB)
	if err != nil {
		return err
	}
	runs, err := schedule.Recent(ctx, a.DB.DB, recentRuns)
	if err != nil {
		return err
	}
	leader, until, ok, err := schedule.Leader(ctx, a.DB.DB)
	if err != nil {
		return err
	}
	p := views.SchedulePage{Nav: nav(c, "Schedule")}
	if ok {
		p.Leader, p.LeaderUntil = leader, until
	}
	for _, t := range a.Tasks {
		l := views.ScheduleTaskLine{Name: t.Name, Every: t.Every.String()}
		if r, ok := last[t.Name]; ok {
			l.Last = runLine(r)
		}
		if r, ok := done[t.Name]; ok {
			l.LastDone = runLine(r)
		}
		p.Tasks = append(p.Tasks, l)
	}
	for _, r := range runs {
		p.Runs = append(p.Runs, runLine(r))
	}
	return a.render(c, http.StatusOK, views.Schedule(p))
}

func runLine(r schedule.Run) views.ScheduleRunLine {
	return views.ScheduleRunLine{ID: r.ID, Task: r.Task, Trigger: r.Trigger, Process: r.Process,
		ScheduledFor: r.ScheduledFor, Started: r.StartedAt, Finished: r.FinishedAt.Time, Attempt: r.Attempt,
		Outcome: r.Outcome.String, Summary: r.Summary, Error: r.Error.String}
}
