// Package sequence keeps the sequences of a stateful model, with the
// semantics of OpenVINO Model Server's stateful models: a request carries a
// sequence_id (uint64, 0 means absent) and a sequence_control_input (uint32:
// 0 none, 1 start, 2 end). A start without an id gets an unguessable id
// from the server (53 random bits from crypto/rand, so that it survives
// JavaScript's numbers: MaxAssignedID); a start may also name its own id,
// whose secrecy is then the caller's concern. Every other request names an
// existing sequence, and whoever knows a sequence's id can continue or end
// it: the id is the only credential.
//
// A Manager holds one model's sequences, each with its own opaque state (the
// runtime's copy of the model state). Requests of one sequence run one at a
// time; requests of different sequences run in parallel. Errors are *Error
// values whose Code is the class OpenVINO Model Server gives them, with its
// gRPC code and HTTP status.
//
// Idle sequences are removed by Sweep: a sequence that received no request
// since the previous sweep is dropped. The sidecar calls Sweep every
// sequence_cleaner_poll_wait_minutes. With Options.IdleAfter set, a start
// that finds every slot taken first removes the sequences idle that long
// itself, so the sweep cannot be starved. Options.MaxPerClient bounds the
// sequences one client (named by WithClient: bidding-server's KServe front
// names the remote host) may hold, so one client cannot take every slot.
package sequence
