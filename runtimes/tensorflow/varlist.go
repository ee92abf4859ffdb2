package tensorflow

import (
	"fmt"
	"sort"
)

// CheckpointTensor describes one tensor of a checkpoint, as its index
// (variables.index) records it.
type CheckpointTensor struct {
	Name  string  // the checkpoint key
	DType string  // "FLOAT", "INT64", ... (TensorFlow's names without DT_)
	Shape []int64 // nil when the index records no shape
	Bytes int64   // its size in the data shard
	Shard int32
	// Offset is where its bytes start in the data shard.
	Offset int64
	// CRC32C is the masked CRC32C of its bytes (MaskCRC of the plain one).
	CRC32C uint32
}

// MaskCRC masks a CRC32C (Castagnoli) as checkpoint indexes record it.
func MaskCRC(c uint32) uint32 { return maskCRC(c) }

// CheckpointTensors lists the tensors of the checkpoint whose index
// (variables/variables.index) is index, sorted by name. It reads only the
// index: the data shards may be far larger than memory.
func CheckpointTensors(index []byte) (out []CheckpointTensor, err error) {
	entries, _, err := readIndex(index, "variables.index")
	if err != nil {
		return nil, err
	}
	for name, e := range entries {
		t := CheckpointTensor{Name: name, DType: dtypeName(e.Dtype), Bytes: e.Size, Shard: e.ShardId, Offset: e.Offset, CRC32C: e.Crc32C}
		if e.Shape != nil {
			if t.Shape, err = shapeWithin(e.Shape, maxMappedElements); err != nil {
				return nil, fmt.Errorf("%w: variables.index: tensor %q: %v", ErrCorruptCheckpoint, name, err)
			}
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
