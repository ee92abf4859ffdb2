package sequence

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
)

// Control is the value of sequence_control_input.
type Control uint32

const (
	// NoControl: a request in the middle of a sequence.
	NoControl Control = 0
	// Start begins a sequence.
	Start Control = 1
	// End ends a sequence after its request has run.
	End Control = 2
)

// DefaultMaxSequences is max_sequence_number's default.
const DefaultMaxSequences = 500

// MaxAssignedID bounds the ids the server assigns: 2^53-1, JavaScript's
// Number.MAX_SAFE_INTEGER. runInference's answer reaches the script through
// JSON.parse, which reads every number as a float64; a larger id would
// come back rounded and name no sequence, or another one. So an assigned
// id is 53 random bits (see Manager.Run), not the 64 a uint64 could hold.
const MaxAssignedID = 1<<53 - 1

// Code is the class of a sequence error, as OpenVINO Model Server's error
// table gives it.
type Code int

const (
	InvalidArgument Code = iota + 1
	NotFound
	AlreadyExists
	Unavailable
	FailedPrecondition
)

var codeNames = map[Code]string{
	InvalidArgument:    "INVALID_ARGUMENT",
	NotFound:           "NOT_FOUND",
	AlreadyExists:      "ALREADY_EXISTS",
	Unavailable:        "UNAVAILABLE",
	FailedPrecondition: "FAILED_PRECONDITION",
}

// Valid reports whether c is one of the five classes.
func (c Code) Valid() bool {
	_, ok := codeNames[c]
	return ok
}

// ParseCode maps a class name ("NOT_FOUND") back to its Code.
func ParseCode(name string) (Code, bool) {
	for c, n := range codeNames {
		if n == name {
			return c, true
		}
	}
	return 0, false
}

func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// HTTPStatus is the HTTP status of the class: 400, 404, 409, 503, 412.
func (c Code) HTTPStatus() int {
	switch c {
	case InvalidArgument:
		return http.StatusBadRequest
	case NotFound:
		return http.StatusNotFound
	case AlreadyExists:
		return http.StatusConflict
	case Unavailable:
		return http.StatusServiceUnavailable
	case FailedPrecondition:
		return http.StatusPreconditionFailed
	}
	return http.StatusInternalServerError
}

// GRPCCode is the gRPC status code of the class.
func (c Code) GRPCCode() codes.Code {
	switch c {
	case InvalidArgument:
		return codes.InvalidArgument
	case NotFound:
		return codes.NotFound
	case AlreadyExists:
		return codes.AlreadyExists
	case Unavailable:
		return codes.Unavailable
	case FailedPrecondition:
		return codes.FailedPrecondition
	}
	return codes.Internal
}

// The messages of OpenVINO Model Server's error table.
const (
	MsgNotFound        = "Sequence with a provided ID does not exist."
	MsgAlreadyExists   = "Sequence with a provided ID already exists."
	MsgTerminating     = "Server received SEQUENCE START request with ID of the sequence that is set for termination, but the last request of that sequence is still being processed."
	MsgLimit           = "Max sequence number has been reached. Could not create a new sequence."
	MsgNoID            = "Sequence ID has not been provided in request inputs."
	MsgBadControlValue = "Unexpected value of sequence control input."
)

// Error is a sequence error: its class and a message that names the model,
// the sequence id and the seed's description.
type Error struct {
	Code Code
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// CodeOf returns the class of the first *Error in err's chain.
func CodeOf(err error) (Code, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Code, true
	}
	return 0, false
}

// ErrClosed is returned by Run after Close (the model was replaced or
// deleted: its sequences are gone).
var ErrClosed = errors.New("the model's sequences were dropped (model closed)")

// Options configure a Manager; the zero value means defaults.
type Options struct {
	// Name names the model in error messages (its path).
	Name string
	// MaxSequences bounds the live sequences; 0 means DefaultMaxSequences.
	MaxSequences int
	// NoIdleCleanup exempts the model from Sweep (idle_sequence_cleanup
	// false).
	NoIdleCleanup bool
	// MaxPerClient bounds the live sequences one client (WithClient) may
	// hold, so that one client cannot take every slot; 0 =
	// DefaultMaxPerClient(MaxSequences), < 0 = no bound. Starts that name no
	// client are bounded by MaxSequences only.
	MaxPerClient int
	// IdleAfter, when set, lets a start that finds every slot taken first
	// remove the sequences idle (no request, none in flight) for at least
	// this long, without waiting for the next Sweep: the periodic sweep
	// cannot be delayed into a denial of service. 0 = only Sweep removes
	// idle sequences.
	IdleAfter time.Duration
}

// DefaultMaxPerClient is Options.MaxPerClient's default for a model of
// maxSequences slots: a quarter of them, but at least 16 (or all of them,
// when there are fewer): a small pool is not split.
func DefaultMaxPerClient(maxSequences int) int {
	return max(maxSequences/4, min(maxSequences, 16))
}

type clientKey struct{}

// WithClient returns ctx naming the client a start is counted against
// (Options.MaxPerClient): a remote address, a connection.
func WithClient(ctx context.Context, client string) context.Context {
	return context.WithValue(ctx, clientKey{}, client)
}

func clientFrom(ctx context.Context) string {
	c, _ := ctx.Value(clientKey{}).(string)
	return c
}

// Manager holds the sequences of one model. Its methods are safe for
// concurrent use.
type Manager struct {
	opts     Options
	newState func() (any, error)
	// random draws the bits of an assigned id: crypto/rand, except in
	// tests.
	random func() uint64

	mu        sync.Mutex
	seqs      map[uint64]*seq
	perClient map[string]int // live sequences by client (named ones only)
	closed    bool
}

type seq struct {
	id uint64
	// lock serialises the sequence's requests; a channel so that a waiter
	// can give up when its context ends.
	lock  chan struct{}
	state any
	// Guarded by Manager.mu.
	ending  bool // an end request is in flight
	removed bool
	used    atomic.Bool  // a request arrived since the last sweep
	last    atomic.Int64 // when the last request arrived (UnixNano)
	client  string       // the client it counts against ("" = none)
}

// NewManager returns a manager whose sequences start from newState's
// state. newState must return a fresh state that shares nothing writable
// with any other (one user's sequence must never see another's).
func NewManager(opts Options, newState func() (any, error)) *Manager {
	if opts.MaxSequences <= 0 {
		opts.MaxSequences = DefaultMaxSequences
	}
	if opts.MaxPerClient == 0 {
		opts.MaxPerClient = DefaultMaxPerClient(opts.MaxSequences)
	}
	return &Manager{opts: opts, newState: newState, random: randomUint64, seqs: map[uint64]*seq{}, perClient: map[string]int{}}
}

func randomUint64() uint64 {
	var b [8]byte
	rand.Read(b[:]) // never fails: crypto/rand crashes the program instead
	return binary.LittleEndian.Uint64(b[:])
}

// Len is the number of live sequences.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.seqs)
}

func (m *Manager) errorf(code Code, id uint64, msg string) error {
	if id == 0 {
		return &Error{Code: code, Msg: fmt.Sprintf("model %q: %s", m.opts.Name, msg)}
	}
	return &Error{Code: code, Msg: fmt.Sprintf("model %q: sequence_id %d: %s", m.opts.Name, id, msg)}
}

// Run runs fn with the state of the sequence the request names and returns
// the sequence's id (the assigned one for a start without an id). A start
// creates the sequence (and drops it again when fn fails, so that the start
// can be retried); an end drops it after fn, whatever fn returned.
//
// An id is a capability: any request that names it continues or ends its
// sequence. The server assigns a start without an id (or with id 0) a
// random one from crypto/rand, uniform in [1, MaxAssignedID] and not in
// use, so that a caller cannot guess another's. A start that names its id
// takes it as OpenVINO Model Server and Triton do: choosing an id nobody
// else can guess is then the caller's business.
func (m *Manager) Run(ctx context.Context, id uint64, ctl Control, fn func(state any) error) (uint64, error) {
	switch ctl {
	case Start:
		return m.start(ctx, id, fn)
	case NoControl, End:
	default:
		return id, m.errorf(InvalidArgument, id, fmt.Sprintf("sequence_control_input is %d, want 0, 1 or 2: %s", uint32(ctl), MsgBadControlValue))
	}
	if id == 0 {
		return 0, m.errorf(InvalidArgument, 0, MsgNoID)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return id, ErrClosed
	}
	s, ok := m.seqs[id]
	if !ok {
		m.mu.Unlock()
		return id, m.errorf(NotFound, id, MsgNotFound)
	}
	if ctl == End {
		s.ending = true
	}
	m.mu.Unlock()
	s.touch()
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		if ctl == End {
			// The end never ran: the sequence goes on.
			m.mu.Lock()
			s.ending = false
			m.mu.Unlock()
		}
		return id, ctx.Err()
	}
	defer func() { <-s.lock }()
	m.mu.Lock()
	removed := s.removed
	m.mu.Unlock()
	if removed {
		// Ended, swept or closed while this request waited.
		return id, m.errorf(NotFound, id, MsgNotFound)
	}
	err := fn(s.state)
	if ctl == End {
		m.remove(s)
	}
	return id, err
}

func (m *Manager) start(ctx context.Context, id uint64, fn func(state any) error) (uint64, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return id, ErrClosed
	}
	if s, ok := m.seqs[id]; ok && id != 0 {
		m.mu.Unlock()
		if s.ending {
			return id, m.errorf(FailedPrecondition, id, MsgTerminating)
		}
		return id, m.errorf(AlreadyExists, id, MsgAlreadyExists)
	}
	client := clientFrom(ctx)
	if client != "" && m.opts.MaxPerClient > 0 && m.perClient[client] >= m.opts.MaxPerClient {
		m.mu.Unlock()
		return id, m.errorf(Unavailable, id, fmt.Sprintf("%s (this client, %s, holds %d sequences: the per-client cap; end or abandon some)", MsgLimit, client, m.perClient[client]))
	}
	if len(m.seqs) >= m.opts.MaxSequences && m.opts.IdleAfter > 0 && !m.opts.NoIdleCleanup {
		m.removeIdleLocked(time.Now().Add(-m.opts.IdleAfter))
	}
	if len(m.seqs) >= m.opts.MaxSequences {
		m.mu.Unlock()
		return id, m.errorf(Unavailable, id, fmt.Sprintf("%s (max_sequence_number %d)", MsgLimit, m.opts.MaxSequences))
	}
	if id == 0 {
		id = m.assignID()
	}
	s := &seq{id: id, lock: make(chan struct{}, 1), client: client}
	s.lock <- struct{}{} // held until the start request is done
	s.touch()
	m.seqs[id] = s
	if client != "" {
		m.perClient[client]++
	}
	m.mu.Unlock()
	defer func() { <-s.lock }()

	state, err := m.newState()
	if err == nil {
		s.state = state
		err = fn(state)
	}
	if err != nil {
		m.remove(s)
	}
	return id, err
}

// assignID returns a random id in [1, MaxAssignedID] that is not in use
// (m.mu held). Ids are drawn, not counted: a counter would hand the next
// caller a neighbour of a live id. 0 means "no id" and an id in use is
// someone's capability, so either is drawn again; with at most 2^32 live
// sequences in 2^53 ids a draw fails less than once in two million.
func (m *Manager) assignID() uint64 {
	for {
		id := m.random() & MaxAssignedID
		if _, taken := m.seqs[id]; id != 0 && !taken {
			return id
		}
	}
}

func (m *Manager) remove(s *seq) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seqs[s.id] == s {
		m.dropLocked(s)
	}
	s.removed = true
	s.state = nil
}

// dropLocked takes s out of the live set and its client's count (m.mu
// held, s live).
func (m *Manager) dropLocked(s *seq) {
	delete(m.seqs, s.id)
	if s.client != "" {
		if m.perClient[s.client]--; m.perClient[s.client] <= 0 {
			delete(m.perClient, s.client)
		}
	}
}

func (s *seq) touch() {
	s.used.Store(true)
	s.last.Store(time.Now().UnixNano())
}

// removeIdleLocked removes the sequences with no request since before and
// none in flight (m.mu held); it returns how many.
func (m *Manager) removeIdleLocked(before time.Time) int {
	n := 0
	cut := before.UnixNano()
	for _, s := range m.seqs {
		if s.last.Load() >= cut {
			continue
		}
		if m.removeIfIdleLocked(s) {
			n++
		}
	}
	return n
}

// removeIfIdleLocked removes s when no request of it is in flight (its
// lock is free; m.mu held) and reports whether it did.
func (m *Manager) removeIfIdleLocked(s *seq) bool {
	select {
	case s.lock <- struct{}{}: // nothing in flight
		m.dropLocked(s)
		s.removed = true
		s.state = nil
		<-s.lock
		return true
	default:
		return false
	}
}

// PerClient is the number of live sequences client holds.
func (m *Manager) PerClient(client string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.perClient[client]
}

// Sweep removes the sequences that received no request since the previous
// sweep and have none in flight, and returns how many it removed. A model
// with NoIdleCleanup is never swept.
func (m *Manager) Sweep() int {
	if m.opts.NoIdleCleanup {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.seqs {
		if s.used.Swap(false) {
			continue
		}
		if m.removeIfIdleLocked(s) {
			n++
		}
	}
	return n
}

// Close drops every sequence; later requests get ErrClosed. Requests in
// flight finish on the state they hold.
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	for id, s := range m.seqs {
		s.removed = true
		delete(m.seqs, id)
	}
	clear(m.perClient)
}
