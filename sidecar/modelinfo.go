package sidecar

import (
	"strings"
	"time"

	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/tensor"
)

// The GetModels conversions. Tensor names come from model files and may
// not be UTF-8, which protobuf refuses to marshal: they are mended, so one
// odd name cannot fail the whole answer.

func modelInfoToProto(in ModelInfo) *inferencepb.ModelStatus {
	p := &inferencepb.ModelStatus{
		ModelPath:   in.Path,
		State:       inferencepb.ModelState_LOADING,
		Runtime:     in.Runtime,
		Checksum:    in.Checksum,
		Positional:  in.Signature.Positional,
		LoadMs:      ms(in.Load),
		WarmUpMs:    ms(in.WarmUp),
		Files:       int32(in.Files),
		Bytes:       in.Bytes,
		MappedBytes: in.MappedBytes,
		CopiedBytes: in.CopiedBytes,
		Inputs:      specsToProto(in.Signature.Inputs),
		Outputs:     specsToProto(in.Signature.Outputs),
	}
	if in.State == ModelServing {
		p.State = inferencepb.ModelState_SERVING
	}
	if !in.LoadedAt.IsZero() {
		p.LoadedAtUnixNanos = in.LoadedAt.UnixNano()
	}
	return p
}

func modelInfoFromProto(p *inferencepb.ModelStatus) ModelInfo {
	in := ModelInfo{
		Path:        p.GetModelPath(),
		State:       ModelLoading,
		Runtime:     p.GetRuntime(),
		Checksum:    p.GetChecksum(),
		Load:        time.Duration(p.GetLoadMs() * float64(time.Millisecond)),
		WarmUp:      time.Duration(p.GetWarmUpMs() * float64(time.Millisecond)),
		Files:       int(p.GetFiles()),
		Bytes:       p.GetBytes(),
		MappedBytes: p.GetMappedBytes(),
		CopiedBytes: p.GetCopiedBytes(),
		Signature: runtimes.Signature{
			Inputs:     specsFromProto(p.GetInputs()),
			Outputs:    specsFromProto(p.GetOutputs()),
			Positional: p.GetPositional(),
		},
	}
	if p.GetState() == inferencepb.ModelState_SERVING {
		in.State = ModelServing
	}
	if ns := p.GetLoadedAtUnixNanos(); ns != 0 {
		in.LoadedAt = time.Unix(0, ns)
	}
	return in
}

func specsToProto(specs []runtimes.TensorSpec) []*inferencepb.TensorSpec {
	out := make([]*inferencepb.TensorSpec, len(specs))
	for i, s := range specs {
		p := &inferencepb.TensorSpec{
			Name:        strings.ToValidUTF8(s.Name, "\uFFFD"),
			DataType:    dtypeToProto(s.DType),
			Shape:       s.Shape,
			UnknownRank: s.Shape == nil,
			Optional:    s.Optional,
		}
		for _, a := range s.Aliases {
			p.Aliases = append(p.Aliases, strings.ToValidUTF8(a, "\uFFFD"))
		}
		out[i] = p
	}
	return out
}

func specsFromProto(specs []*inferencepb.TensorSpec) []runtimes.TensorSpec {
	out := make([]runtimes.TensorSpec, len(specs))
	for i, p := range specs {
		s := runtimes.TensorSpec{Name: p.GetName(), Aliases: p.GetAliases(), Optional: p.GetOptional()}
		// A type outside the six reads as Invalid (any).
		if d := tensor.DType(p.GetDataType()); d.String() == p.GetDataType().String() {
			s.DType = d
		}
		switch {
		case p.GetUnknownRank():
		case p.GetShape() == nil:
			s.Shape = []int64{} // a scalar
		default:
			s.Shape = p.GetShape()
		}
		out[i] = s
	}
	return out
}
