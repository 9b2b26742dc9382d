package checkout

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/tekrar/tekrar/checkout/catalog"
	"github.com/tekrar/tekrar/checkout/clients"
	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/psp"
	tdb "github.com/tekrar/tekrar/internal/db"
	"github.com/tekrar/tekrar/internal/pgtext"
	"github.com/tekrar/tekrar/internal/problem"
)

// A register (a till) sells while it is offline and sends its sales later, in batches, as
// often as it likes: each sale carries the idempotency key the register made when the sale
// happened, and is an ordinary order under that key (the same tables, the fingerprint of
// the same POST /v1/orders body, the key scoped to the client). So a batch resent whole
// replays, a batch that overlaps an earlier one creates only the sales that are new, and a
// sale sent alone with POST /v1/orders and again in a batch is one order. docs/pos.md.

// Limits of a batch (docs/pos.md): more is refused whole, before anything runs.
const (
	MaxBatchSales = 500
	MaxBatchBytes = 4 << 20
	// saleChunk is how many cash and card_present sales one transaction claims.
	saleChunk = 100
	// cardSaleWorkers bounds the card_token sales charged at once for one batch.
	cardSaleWorkers = 4
)

// Outcomes of a sale in a batch's answer.
const (
	SaleCreated    = "created"     // this batch created the order
	SaleReplayed   = "replayed"    // the key was answered before: its stored answer
	SaleConflict   = "conflict"    // the key is another sale's
	SaleExpired    = "expired"     // the key is past its retention
	SaleDeclined   = "declined"    // a card_token sale that ended unpaid, for good (stored): declined, or given up
	SaleInvalid    = "invalid"     // the sale can never be taken as sent; nothing stored
	SaleInProgress = "in_progress" // another request is running the key: resend later
	SaleFailed     = "failed"      // not finished (provider unknown, store trouble): resend later
)

// RegisterInput names the register a batch comes from: the client's own id for it (the
// syntax of an idempotency key) and a name for people. The first batch creates it; a
// later one with another name renames it.
type RegisterInput struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Sale is one sale of a batch, decoded by the API: its key, when it happened at the
// register, and its order, both as sent (Body, fingerprinted as POST /v1/orders) and
// decoded (Order). Invalid is set when the order could not be decoded.
type Sale struct {
	Key     string
	SoldAt  string
	Body    []byte
	Order   OrderInput
	Invalid error
}

// SaleBatch is a decoded POST /v1/pos/sales.
type SaleBatch struct {
	Client   clients.Client
	BatchKey string
	Register RegisterInput
	Sales    []Sale
	Meta     Meta
}

// Validate checks what the batch as a whole must get right; a sale's own problems are its
// outcome (invalid), and do not refuse the others.
func (b *SaleBatch) Validate() []FieldError {
	var errs []FieldError
	if !catalog.ValidCartID(b.BatchKey) {
		errs = append(errs, FieldError{Field: "batch_key", Message: "must be 1 to 255 visible ASCII characters"})
	}
	if !catalog.ValidCartID(b.Register.ID) {
		errs = append(errs, FieldError{Field: "register.id", Message: "must be 1 to 255 visible ASCII characters"})
	}
	if b.Register.Name == "" || len(b.Register.Name) > 200 || !pgtext.Valid(b.Register.Name) {
		errs = append(errs, FieldError{Field: "register.name", Message: "must be 1 to 200 characters, without U+0000"})
	}
	if len(b.Sales) == 0 {
		errs = append(errs, FieldError{Field: "sales", Message: "must list at least one sale"})
	}
	return errs
}

// SaleOutcome is what became of one sale, in the batch's answer, in input order. Status
// and the body (Order for a 2xx, Problem otherwise) are what POST /v1/orders answers, or
// replays, for the same key.
type SaleOutcome struct {
	Index          int             `json:"index"`
	IdempotencyKey string          `json:"idempotency_key"`
	Outcome        string          `json:"outcome"`
	Status         int             `json:"status"`
	Oversold       bool            `json:"oversold,omitempty"`
	Order          json.RawMessage `json:"order,omitempty"`
	Problem        json.RawMessage `json:"problem,omitempty"`
}

// saleWork is a sale on its way through SellBatch.
type saleWork struct {
	i        int
	sale     *Sale
	fp       [32]byte
	soldAt   time.Time
	publicID string   // made here, so that a cash sale's answer is complete before its claim
	response Response // a cash or card_present sale's answer, stored by its claim
	lines    []stockLine
	oversold int64 // units sold beyond the level, set by the claim
	invalid  error // the claim found a line naming no product
	// scope and card are what a card sale's claim stores of its scope, as POST /v1/orders's
	// claim does (the engine's claim computed them): so that a retry paying with a new token
	// of the same card replays whichever door claimed the key. Nil for a sale paid at the
	// register, whose key matches its exact fingerprint only.
	scope []byte
	card  sql.NullString
}

func (w *saleWork) paidAtClaim() bool { return w.sale.Order.Payment.Method != "" }

// SellBatch takes a register's batch of sales: every sale once, whatever was sent before
// or is being sent concurrently. Cash and card_present sales are claimed (key, paid
// order, stock, pos_sales row, order.paid event) in chunks of saleChunk, one transaction
// each; card_token sales run the order's keyed path, charged through the provider, a few
// at a time. A chunk that committed is never undone by a later failure: the batch's resend
// replays it and completes the rest.
func (s *Service) SellBatch(ctx context.Context, b SaleBatch) ([]SaleOutcome, error) {
	now := s.cfg.Now()
	registerID, err := upsertRegister(ctx, s.db, b.Client.ID, b.Register, now)
	if err != nil {
		return nil, err
	}
	out := make([]SaleOutcome, len(b.Sales))
	// fromStore marks the sales whose answer is their key's stored one, built by saleAnswer
	// once every sale has run; their outcome says until then whether this batch finished
	// the key (created) or found it answered (replayed).
	fromStore := make([]bool, len(b.Sales))
	first := map[string]int{} // key → index of its first sale in the batch
	var fresh []*saleWork     // valid, first of their key
	var dups []int
	for i := range b.Sales {
		sl := &b.Sales[i]
		out[i] = SaleOutcome{Index: i, IdempotencyKey: sl.Key}
		if _, ok := first[sl.Key]; ok {
			dups = append(dups, i)
			continue
		}
		w, p := s.prepareSale(i, sl)
		if p != nil {
			s.setProblem(&out[i], SaleInvalid, p)
			continue
		}
		first[sl.Key] = i
		fresh = append(fresh, w)
	}

	// What the keys already say: one query for the whole batch.
	keys := make([]string, len(fresh))
	for i, w := range fresh {
		keys[i] = w.sale.Key
	}
	known, err := lookupKeys(ctx, s.db, b.Client.ID, keys, now)
	if err != nil {
		return nil, err
	}
	var cash, card []*saleWork
	for _, w := range s.knownSales(ctx, b, fresh, known, out, fromStore) {
		if w.paidAtClaim() {
			cash = append(cash, w)
		} else {
			card = append(card, w)
		}
	}

	// Cash and card_present: chunked claims.
	var lost []*saleWork
	for start := 0; start < len(cash); start += saleChunk {
		chunk := cash[start:min(start+saleChunk, len(cash))]
		// Detached: a cash sale's claim records its payment, and commits on its own.
		claimed, err := s.claimSalesRetry(tdb.Detach(ctx), b.Client, registerID, chunk, now)
		if err != nil {
			return nil, err
		}
		for _, w := range chunk {
			switch k, ok := claimed[w.sale.Key]; {
			case w.invalid != nil:
				s.setProblem(&out[w.i], SaleInvalid, w.invalid)
			case ok:
				out[w.i].Outcome, fromStore[w.i] = SaleCreated, true
				s.record(s.saleRequest(b, w), k, KindCreated, w.response.Status, map[string]any{"order_id": w.publicID})
				s.record(s.saleRequest(b, w), k, KindCompleted, w.response.Status, map[string]any{"order_id": w.publicID})
			default:
				lost = append(lost, w) // claimed by a concurrent request, or tombstoned
			}
		}
	}
	if len(lost) > 0 {
		keys = keys[:0]
		for _, w := range lost {
			keys = append(keys, w.sale.Key)
		}
		known, err := lookupKeys(ctx, s.db, b.Client.ID, keys, s.cfg.Now())
		if err != nil {
			return nil, err
		}
		for _, w := range s.knownSales(ctx, b, lost, known, out, fromStore) { // cash: never pending
			s.setProblem(&out[w.i], SaleFailed, keyed.ProblemInUse())
		}
	}

	// card_token: the order's own keyed path, a few at a time.
	var wg sync.WaitGroup
	sem := make(chan struct{}, cardSaleWorkers)
	for _, w := range card {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fromStore[w.i] = s.sellByCard(ctx, b, registerID, w, &out[w.i])
		}()
	}
	wg.Wait()

	// The same key again in the batch: the same request is answered as its first sale was
	// (a stored answer replayed, anything else the same outcome), another is a conflict.
	for _, i := range dups {
		j := first[b.Sales[i].Key]
		fp, err := s.saleFingerprint(b.Sales[i])
		fpFirst, _ := s.saleFingerprint(b.Sales[j])
		switch {
		case err != nil || b.Sales[i].Invalid != nil:
			s.setProblem(&out[i], SaleInvalid, problem.Of(problem.CodeMalformedJSON))
		case fp != fpFirst:
			r := s.cfg.Routes.Order
			s.setProblem(&out[i], SaleConflict, keyed.ProblemReused(&Key{Method: r.Method, Path: r.Route}, r.Method, r.Route))
		case fromStore[j]:
			out[i].Outcome, fromStore[i] = SaleReplayed, true
		default:
			out[i] = out[j]
			out[i].Index = i
		}
	}
	if err := s.answerFromStore(ctx, b.Client.ID, out, fromStore); err != nil {
		return nil, err
	}

	if err := recordArrival(ctx, s.db, registerID, b.BatchKey, out, s.cfg.Now()); err != nil {
		s.logger.Warn("record batch arrival", "register_id", registerID, "err", err)
	}
	if s.cfg.ObserveSales != nil {
		s.cfg.ObserveSales(b.Client.ID, out)
	}
	return out, nil
}

// saleFingerprint is the exact fingerprint of sl as a request to the order route.
func (s *Service) saleFingerprint(sl Sale) ([32]byte, error) {
	return Fingerprint(s.cfg.Routes.Order.Method, s.cfg.Routes.Order.Route, sl.Body)
}

// prepareSale validates one sale and works out what its claim needs.
func (s *Service) prepareSale(i int, sl *Sale) (*saleWork, error) {
	if sl.Invalid != nil {
		return nil, sl.Invalid
	}
	var errs []FieldError
	if !catalog.ValidCartID(sl.Key) {
		errs = append(errs, FieldError{Field: "idempotency_key", Message: "must be 1 to 255 visible ASCII characters"})
	}
	soldAt, err := time.Parse(time.RFC3339Nano, sl.SoldAt)
	if err != nil || soldAt.Year() < 2000 || soldAt.Year() > 9999 {
		errs = append(errs, FieldError{Field: "sold_at", Message: "must be an RFC 3339 time, such as 2026-05-01T09:30:00+03:00"})
	}
	for _, e := range sl.Order.ValidateSale() {
		e.Field = "order." + e.Field
		errs = append(errs, e)
	}
	if len(errs) > 0 {
		return nil, ValidationFailed(errs)
	}
	fp, err := s.saleFingerprint(*sl)
	if err != nil {
		return nil, problem.Of(problem.CodeMalformedJSON)
	}
	return &saleWork{i: i, sale: sl, fp: fp, soldAt: soldAt, lines: stockLines(sl.Order.Items)}, nil
}

// knownSales answers the sales of ws whose key exists (or existed, known) by the decision
// table that answers POST /v1/orders, in one keyed.Engine.ExecuteMany for them all: the
// same answers, and the same events in the keys' history. A sale answered with its key's
// stored answer is marked fromStore, which saleAnswer then builds. It returns, in their
// order, the sales left to run: those whose key does not exist, and the card_token sales
// whose key is in progress, which the order's keyed path (sellByCard) waits for or takes
// over. A sale paid at the register never runs there: its claim completes its key, so its
// own body meets its key in progress only while a concurrent batch claims it, and it is
// refused in use.
func (s *Service) knownSales(ctx context.Context, b SaleBatch, ws []*saleWork, known map[string]*Key,
	out []SaleOutcome, fromStore []bool) (rest []*saleWork) {
	var batch []keyed.Known
	var of []*saleWork
	for _, w := range ws {
		if k, ok := known[w.sale.Key]; ok {
			req := s.saleRequest(b, w)
			batch = append(batch, keyed.Known{Request: req.engine(), Fingerprint: w.fp, Key: k,
				Op: &orderOp{s: s, in: w.sale.Order}, Runs: !w.paidAtClaim()})
			of = append(of, w)
		}
	}
	pending := map[*saleWork]bool{}
	for i, a := range s.eng.ExecuteMany(ctx, batch) {
		w := of[i]
		switch {
		case a.Pending:
			pending[w] = true
		case a.Err == nil:
			out[w.i].Outcome, fromStore[w.i] = SaleReplayed, true
		default:
			s.saleRefused(&out[w.i], w, a.Err)
		}
	}
	for _, w := range ws {
		if _, ok := known[w.sale.Key]; !ok || pending[w] {
			rest = append(rest, w)
		}
	}
	return rest
}

// answerFromStore builds, with saleAnswer, the answer of every sale marked fromStore, from
// what Postgres stored for its key: one query for the batch.
func (s *Service) answerFromStore(ctx context.Context, clientID int64, out []SaleOutcome, fromStore []bool) error {
	var keys []string
	for i, ok := range fromStore {
		if ok {
			keys = append(keys, out[i].IdempotencyKey)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	stored, err := storedSales(ctx, s.db, clientID, keys)
	if err != nil {
		return err
	}
	for i, ok := range fromStore {
		if !ok {
			continue
		}
		if st, found := stored[out[i].IdempotencyKey]; found {
			saleAnswer(&out[i], out[i].Outcome == SaleReplayed, st)
		} else {
			s.setProblem(&out[i], SaleFailed, StoreUnavailable()) // answered, then gone: resend, and learn what became of it
		}
	}
	return nil
}

// saleAnswer is the one builder of a sale's answer that its key stored: the first
// execution's (created; declined when it ended unpaid), a replay's (an earlier batch, a
// concurrent one, POST /v1/orders), an in-batch duplicate's and a takeover's. Everything
// in it is what Postgres holds (st): the status and the bytes of the key's response, and
// oversold from the sale's register row, so that an answer given again is the first one,
// byte for byte, whichever path gave either.
func saleAnswer(o *SaleOutcome, replayed bool, st storedSale) {
	o.Status, o.Order, o.Problem = int(st.Status.Int32), nil, nil
	o.Oversold = st.Oversold.Int64 > 0
	switch {
	case replayed:
		o.Outcome = SaleReplayed
	case o.Status < 300:
		o.Outcome = SaleCreated
	default:
		o.Outcome = SaleDeclined
	}
	if o.Status < 300 {
		o.Order = st.Body
	} else {
		o.Problem = st.Body
	}
}

// sellByCard runs a card_token sale through the order's keyed path (execute), whose claim
// is the register's (posOp): the provider charges it like any order. It reports whether the
// key now holds the sale's answer (this run stored it, or found it stored), which
// saleAnswer then builds; o says which.
func (s *Service) sellByCard(ctx context.Context, b SaleBatch, registerID int64, w *saleWork, o *SaleOutcome) (stored bool) {
	req := s.saleRequest(b, w)
	req.Wait = s.cfg.MaxWait // a concurrent batch's charge of this sale is waited for
	op := &posOp{orderOp: orderOp{s: s, in: w.sale.Order}, client: b.Client, registerID: registerID, w: w}
	res, err := s.execute(ctx, req, keyed.Fingerprinted(w.fp), op)
	switch {
	case err == nil && res.Replayed:
		o.Outcome = SaleReplayed
		return true
	case err == nil:
		o.Outcome = SaleCreated
		return true
	}
	s.saleRefused(o, w, err)
	return false
}

// saleRefused makes o the outcome of a sale that the keyed path (ExecuteMany, Execute) did not
// answer with a stored response: its problem, as POST /v1/orders answers it, with the
// outcome that names it for the register.
func (s *Service) saleRefused(o *SaleOutcome, w *saleWork, err error) {
	var p *problem.Problem
	if !errors.As(err, &p) {
		s.logger.Warn("register sale", "key", w.sale.Key, "err", err)
		s.setProblem(o, SaleFailed, StoreUnavailable())
		return
	}
	switch p.Code {
	case problem.CodeIdempotencyKeyReused:
		s.setProblem(o, SaleConflict, p)
	case problem.CodeIdempotencyKeyExpired:
		s.setProblem(o, SaleExpired, p)
	case problem.CodeIdempotencyKeyInUse:
		s.setProblem(o, SaleInProgress, p)
	case problem.CodeProductNotFound, problem.CodeValidationFailed:
		s.setProblem(o, SaleInvalid, p)
	default:
		s.setProblem(o, SaleFailed, p)
	}
}

// saleRequest is the keyed request a sale is: the order route under the sale's key.
func (s *Service) saleRequest(b SaleBatch, w *saleWork) Request {
	return Request{Client: b.Client, Key: w.sale.Key, Method: s.cfg.Routes.Order.Method, Path: s.cfg.Routes.Order.Route,
		Body: w.sale.Body, Meta: b.Meta}
}

// setProblem makes o the outcome of err: a problem as the API would answer it, anything
// else (a bug, the store) a failed sale to resend, without its details.
func (s *Service) setProblem(o *SaleOutcome, outcome string, err error) {
	var p *problem.Problem
	if !errors.As(err, &p) {
		p = StoreUnavailable()
		outcome = SaleFailed
	}
	o.Outcome, o.Status, o.Order, o.Problem = outcome, p.Status, nil, p.Body(s.cfg.Routes.Order.Route)
}

// posOp is a card_token sale of a register: an order (orderOp's run and differences)
// whose claim is the register's, which records the register and never refuses for stock.
type posOp struct {
	orderOp
	client     clients.Client
	registerID int64
	w          *saleWork
}

func (o *posOp) Claim(ctx context.Context, k *Key) (*Key, bool, error) {
	o.w.scope, o.w.card = k.ScopeFingerprint, k.CardFingerprint
	claimed, err := o.s.claimSalesRetry(ctx, o.client, o.registerID, []*saleWork{o.w}, k.CreatedAt)
	if err != nil {
		return nil, false, err
	}
	if o.w.invalid != nil {
		return nil, false, o.w.invalid
	}
	if ck, ok := claimed[o.w.sale.Key]; ok {
		return ck, true, nil
	}
	known, err := lookupKeys(ctx, o.s.db, o.client.ID, []string{o.w.sale.Key}, k.CreatedAt)
	if err != nil {
		return nil, false, err
	}
	if t, ok := known[o.w.sale.Key]; ok && t.Tombstone {
		return t, false, nil
	}
	return nil, false, keyed.ErrNoKey // claimed concurrently: Execute looks it up
}

// cashAnswer is the stored answer of a sale paid at the register: the order, paid.
func cashAnswer(w *saleWork, now time.Time) (Response, error) {
	in := w.sale.Order
	view := OrderView{ID: w.publicID, Status: "paid", Amount: in.Amount, Currency: in.Currency, Items: in.Items,
		Customer: in.Customer, Metadata: in.Metadata, CreatedAt: now.UTC(),
		Payment: &PaymentView{Method: in.Payment.Method, ID: in.Payment.Reference, Status: psp.StatusSucceeded}}
	body, err := json.Marshal(view)
	if err != nil {
		return Response{}, fmt.Errorf("encode sale: %w", err)
	}
	return Response{Status: http.StatusCreated, Body: body, Header: map[string]string{"Content-Type": "application/json"}}, nil
}

// outOfCatalogue is a register's sale naming a sku the client has no product for: invalid,
// as tekrar cannot take from a level it does not keep.
func outOfCatalogue(sku string) error {
	return problem.Of(problem.CodeProductNotFound).
		WithDetail("a from_stock line names a sku this client has no product for; the sale was not stored").
		With("sku", sku).Advised()
}

func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode sale: %w", err)
	}
	return string(b), nil
}

// newOrderPublicID is what orders.public_id's default makes, made here when the claim's
// answer must name the order before the claim runs.
func newOrderPublicID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "ord_" + hex.EncodeToString(b[:])
}
