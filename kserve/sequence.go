package kserve

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/proto/kservepb"
	"github.com/inferbid/inferbid/sequence"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// SequenceParams are the sequence fields of a stateful model's request given
// as request parameters (OpenVINO Model Server takes them as inputs, which
// work too: they pass through as any input does). Two vocabularies map onto
// the same sequence manager: OpenVINO's sequence_id + sequence_control_input
// (0 none, 1 start, 2 end), and Triton's sequence_id (a uint64 or a string)
// + sequence_start / sequence_end (booleans).
type SequenceParams struct {
	ID      *uint64 // sequence_id; 0 means absent
	Control *uint32 // sequence_control_input: 0 none, 1 start, 2 end
	// IDString is Triton's string sequence_id (then ID is nil).
	IDString *string
	// Start and End are Triton's sequence_start and sequence_end.
	Start, End *bool
	// IDUnsigned: the gRPC request gave sequence_id as uint64_param, so the
	// answer does too.
	IDUnsigned bool
}

func (p SequenceParams) given() bool {
	return p.ID != nil || p.Control != nil || p.IDString != nil || p.Start != nil || p.End != nil
}

// Triton's names of the sequence flags.
const (
	sequenceStartName = "sequence_start"
	sequenceEndName   = "sequence_end"
)

// sequenceParamJSON reads a sequence parameter of an HTTP request: an
// integer in range (the JSON text itself, so a large id is exact), a
// string sequence_id, or a boolean sequence_start / sequence_end.
func sequenceParamJSON(p *SequenceParams, key string, v gjson.Result) error {
	switch key {
	case sidecar.SequenceIDName, sidecar.SequenceControlName:
	case sequenceStartName, sequenceEndName:
		if v.Type != gjson.True && v.Type != gjson.False {
			return fmt.Errorf("parameters: %q is %s, want true or false", key, inferr.ClipN(v.Raw, 32))
		}
		return setSequenceFlag(p, key, v.Type == gjson.True)
	default:
		return nil
	}
	if key == sidecar.SequenceIDName && v.Type == gjson.String {
		return setSequenceIDString(p, v.Str)
	}
	n, err := strconv.ParseUint(v.Raw, 10, 64)
	if v.Type != gjson.Number || err != nil {
		if key == sidecar.SequenceIDName {
			return fmt.Errorf("parameters: %q is %s, want a non-negative integer or a string", key, inferr.ClipN(v.Raw, 32))
		}
		return fmt.Errorf("parameters: %q is %s, want a non-negative integer", key, inferr.ClipN(v.Raw, 32))
	}
	return setSequenceParam(p, key, n)
}

// maxSequenceIDString bounds a string sequence_id.
const maxSequenceIDString = 256

func setSequenceIDString(p *SequenceParams, id string) error {
	if id == "" {
		return fmt.Errorf("parameters: %q is an empty string", sidecar.SequenceIDName)
	}
	if len(id) > maxSequenceIDString {
		return fmt.Errorf("parameters: %q is a string of %d bytes, the limit is %d", sidecar.SequenceIDName, len(id), maxSequenceIDString)
	}
	p.IDString = &id
	return nil
}

func setSequenceFlag(p *SequenceParams, key string, b bool) error {
	if key == sequenceStartName {
		p.Start = &b
	} else {
		p.End = &b
	}
	return nil
}

// sequenceParamsGRPC reads the sequence parameters of a gRPC request:
// sequence_id as int64_param, uint64_param (the seed's type, for ids above
// 2^63-1) or string_param (Triton's string ids); sequence_control_input
// as an integer; sequence_start / sequence_end as bool_param. The answer
// gives sequence_id back in the form it came in.
func sequenceParamsGRPC(params map[string]*kservepb.InferParameter) (SequenceParams, error) {
	var p SequenceParams
	for _, key := range []string{sequenceStartName, sequenceEndName} {
		v, ok := params[key]
		if !ok {
			continue
		}
		c, ok := v.GetParameterChoice().(*kservepb.InferParameter_BoolParam)
		if !ok {
			return p, fmt.Errorf("parameters: %q must be a bool_param", key)
		}
		if err := setSequenceFlag(&p, key, c.BoolParam); err != nil {
			return p, err
		}
	}
	for _, key := range []string{sidecar.SequenceIDName, sidecar.SequenceControlName} {
		v, ok := params[key]
		if !ok {
			continue
		}
		var n uint64
		switch c := v.GetParameterChoice().(type) {
		case *kservepb.InferParameter_Int64Param:
			if c.Int64Param < 0 {
				return p, fmt.Errorf("parameters: %q is %d, want a non-negative int64_param or a uint64_param", key, c.Int64Param)
			}
			n = uint64(c.Int64Param)
		case *kservepb.InferParameter_Uint64Param:
			n = c.Uint64Param
			if key == sidecar.SequenceIDName {
				p.IDUnsigned = true
			}
		case *kservepb.InferParameter_StringParam:
			if key == sidecar.SequenceIDName {
				if err := setSequenceIDString(&p, c.StringParam); err != nil {
					return p, err
				}
				continue
			}
			return p, fmt.Errorf("parameters: %q must be a non-negative int64_param or a uint64_param", key)
		default:
			if key == sidecar.SequenceIDName {
				return p, fmt.Errorf("parameters: %q must be a non-negative int64_param, a uint64_param or a string_param", key)
			}
			return p, fmt.Errorf("parameters: %q must be a non-negative int64_param or a uint64_param", key)
		}
		if err := setSequenceParam(&p, key, n); err != nil {
			return p, err
		}
	}
	return p, nil
}

func setSequenceParam(p *SequenceParams, key string, n uint64) error {
	if key == sidecar.SequenceIDName {
		p.ID = &n
		return nil
	}
	if n > math.MaxUint32 {
		return fmt.Errorf("parameters: %q is %d, want 0 (none), 1 (start) or 2 (end): %s", key, n, sequence.MsgBadControlValue)
	}
	c := uint32(n)
	p.Control = &c
	return nil
}

// control is the sequence_control_input the parameters mean: the one
// given, or Triton's flags (start 1, end 2, neither 0). Both flags at once
// (a one-request sequence) have no control value in the manager's
// vocabulary, nor do both vocabularies at once.
func (p SequenceParams) control() (*uint32, error) {
	if p.Start == nil && p.End == nil {
		return p.Control, nil
	}
	if p.Control != nil {
		return nil, errorf(http.StatusBadRequest, "parameters: give either %q or %q/%q, not both", sidecar.SequenceControlName, sequenceStartName, sequenceEndName)
	}
	start, end := p.Start != nil && *p.Start, p.End != nil && *p.End
	var c uint32
	switch {
	case start && end:
		return nil, errorf(http.StatusBadRequest, "parameters: %q and %q are both true: a sequence of one request is not supported (start it, then end it with a second request)", sequenceStartName, sequenceEndName)
	case start:
		c = uint32(sequence.Start)
	case end:
		c = uint32(sequence.End)
	}
	return &c, nil
}

// stringSequenceID maps a string sequence_id onto the manager's uint64
// ids: the first 8 bytes of HMAC-SHA256 under a key drawn when the server
// starts, so that the same string names the same sequence while the
// process lives, ids cannot be guessed from the strings (nor the other
// way), and two strings share an id with probability about 2^-64. 0 (no
// id) is never returned.
func (s *Server) stringSequenceID(id string) uint64 {
	h := hmac.New(sha256.New, s.seqKey[:])
	h.Write([]byte(id))
	n := binary.LittleEndian.Uint64(h.Sum(nil))
	if n == 0 {
		n = 1
	}
	return n
}

// withSequenceInputs appends the sequence parameters to the inputs as the
// inputs the sidecar takes, in the seed's types (UINT64 [1] and UINT32
// [1]); giving a field both ways is an error.
//
// A request that carries sequence fields (either way) gets the input
// sequence_client too, naming client (its remote host), against whom the
// sidecar counts the sequences it starts; a client cannot give that input
// itself.
func (s *Server) withSequenceInputs(inputs []tensor.Tensor, p SequenceParams, client string) ([]tensor.Tensor, error) {
	inline := false
	for _, in := range inputs {
		switch in.Name {
		case sidecar.SequenceClientName:
			return nil, errorf(http.StatusBadRequest, "input %s is reserved: the server sets it", in.Name)
		case sidecar.SequenceIDName, sidecar.SequenceControlName:
			if p.given() {
				return nil, errorf(http.StatusBadRequest, "%s is given both as an input and as a parameter", in.Name)
			}
			inline = true
		}
	}
	if !p.given() && !inline {
		return inputs, nil
	}
	out := slices.Clip(inputs)
	if client != "" {
		out = append(out, tensor.New(sidecar.SequenceClientName, []int64{1}, [][]byte{[]byte(client)}))
	}
	if !p.given() {
		return out, nil
	}
	ctl, err := p.control()
	if err != nil {
		return nil, err
	}
	id := p.ID
	if p.IDString != nil {
		n := s.stringSequenceID(*p.IDString)
		id = &n
	}
	if id != nil {
		out = append(out, tensor.New(sidecar.SequenceIDName, []int64{1}, []uint64{*id}))
	}
	if ctl != nil {
		out = append(out, tensor.New(sidecar.SequenceControlName, []int64{1}, []uint32{*ctl}))
	}
	return out, nil
}

// remoteHost is the host of a remote address ("1.2.3.4:5678"), the
// client the per-client sequence cap counts against: every connection
// from one host counts as one client.
func remoteHost(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// takeSequenceID removes the sequence_id output and returns its value, for
// a request that gave the sequence fields as parameters: the answer carries
// it as a parameter too.
func takeSequenceID(outs []tensor.Tensor) ([]tensor.Tensor, *uint64) {
	i := slices.IndexFunc(outs, func(t tensor.Tensor) bool { return t.Name == sidecar.SequenceIDName })
	if i < 0 {
		return outs, nil
	}
	var id uint64
	switch d := outs[i].Data.(type) {
	case []uint64: // the form the parameters were sent in
		if len(d) != 1 {
			return outs, nil
		}
		id = d[0]
	case []int64: // an assigned id, when the request gave none
		if len(d) != 1 || d[0] < 0 {
			return outs, nil
		}
		id = uint64(d[0])
	default:
		return outs, nil
	}
	return slices.Delete(outs, i, i+1), &id
}

// sequenceStatus is the HTTP status of a sequence error from the sidecar
// (its class travels in the sidecar's protocol as sequence_class).
func sequenceStatus(err error) (int, bool) {
	c, ok := sequence.CodeOf(err)
	if !ok {
		return 0, false
	}
	return c.HTTPStatus(), true
}
