package deliveries

// The fan-out's statements kept prepared, for the plan test.
var (
	FanOutSQL  = fanOutSQL
	BacklogSQL = backlogSQL
	BacklogFor = backlogFor
)
