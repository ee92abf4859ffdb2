package tfsave

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	versionspb "github.com/wamuir/graft/tensorflow/core/framework/versions_go_proto"
	protopb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"google.golang.org/protobuf/proto"

	"github.com/inferbid/inferbid/tensor"
)

// BundleTensor is one tensor of a tensor-bundle checkpoint.
type BundleTensor struct {
	// Key is the checkpoint key (the variable name in TF1 checkpoints,
	// "<path>/.ATTRIBUTES/VARIABLE_VALUE" in TF2 object-based ones).
	Key string
	// Tensor is a numeric tensor; ignored when Strings is set.
	Tensor tensor.Tensor
	// Strings, when non-nil, make this a DT_STRING tensor of StringShape
	// (a scalar when StringShape is empty).
	Strings     []string
	StringShape []int64
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const crcMaskDelta = 0xa282ead8

// MaskCRC masks a CRC32C as LevelDB and TensorFlow store it, so that a CRC
// of data holding CRCs stays well distributed.
func MaskCRC(crc uint32) uint32 { return ((crc >> 15) | (crc << 17)) + crcMaskDelta }

// BundleOptions select how the index is written. The zero value writes as
// TensorFlow 2 does.
type BundleOptions struct {
	// Snappy compresses an index block when that saves at least an eighth
	// of it, as TensorFlow 1.x did; TensorFlow 2 never compresses.
	Snappy bool
}

// WriteBundle writes a single-shard tensor bundle as TensorFlow's
// BundleWriter does: the tensors' bytes go to the data file
// (variables.data-00000-of-00001) in the order given, without padding, and
// the index (variables.index) lists them sorted by key after the header.
func WriteBundle(tensors []BundleTensor, opts BundleOptions) (index, data []byte, err error) {
	offsets := make(map[string]*protopb.BundleEntryProto, len(tensors))
	var dataBuf bytes.Buffer
	for i, t := range tensors {
		if t.Key == "" {
			return nil, nil, fmt.Errorf("tfsave: bundle tensor %d has an empty key (reserved for the header)", i)
		}
		if _, dup := offsets[t.Key]; dup {
			return nil, nil, fmt.Errorf("tfsave: bundle key %q appears twice", t.Key)
		}
		entry := &protopb.BundleEntryProto{Offset: int64(dataBuf.Len())}
		var payload []byte
		var crc uint32
		if t.Strings != nil {
			entry.Dtype = typespb.DataType_DT_STRING
			entry.Shape = shapeProto(nonNil(t.StringShape))
			n := int64(1)
			for _, d := range t.StringShape {
				n *= d
			}
			if n != int64(len(t.Strings)) {
				return nil, nil, fmt.Errorf("tfsave: bundle key %q: shape %s needs %d strings, has %d", t.Key, tensor.FormatShape(t.StringShape), n, len(t.Strings))
			}
			payload, crc = encodeStrings(t.Strings)
		} else {
			if entry.Dtype, err = checkTensor(t.Tensor); err != nil {
				return nil, nil, fmt.Errorf("tfsave: bundle key %q: %w", t.Key, err)
			}
			entry.Shape = shapeProto(nonNil(t.Tensor.Shape))
			if payload, err = rawBytes(t.Tensor); err != nil {
				return nil, nil, fmt.Errorf("tfsave: bundle key %q: %w", t.Key, err)
			}
			crc = crc32.Checksum(payload, castagnoli)
		}
		dataBuf.Write(payload)
		entry.Size = int64(len(payload))
		entry.Crc32C = MaskCRC(crc)
		offsets[t.Key] = entry
	}
	keys := sortedKeys(offsets)
	w := newTableWriter(opts.Snappy)
	header, err := proto.MarshalOptions{Deterministic: true}.Marshal(&protopb.BundleHeaderProto{
		NumShards:  1,
		Endianness: protopb.BundleHeaderProto_LITTLE,
		Version:    &versionspb.VersionDef{Producer: 1},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("tfsave: bundle header: %w", err)
	}
	if err := w.add(nil, header); err != nil {
		return nil, nil, err
	}
	for _, k := range keys {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(offsets[k])
		if err != nil {
			return nil, nil, fmt.Errorf("tfsave: bundle key %q: %w", k, err)
		}
		if err := w.add([]byte(k), b); err != nil {
			return nil, nil, err
		}
	}
	return w.finish(), dataBuf.Bytes(), nil
}

// encodeStrings lays out a string tensor as TensorFlow's WriteStringTensor
// does: the varint64 length of each element, the masked CRC32C of the
// lengths, then the bytes of each element. The returned (unmasked) CRC
// covers each length as a 4-byte little-endian integer (not its varint
// bytes), the masked length checksum, and the element bytes.
func encodeStrings(vals []string) ([]byte, uint32) {
	var out []byte
	var crc uint32
	var le [4]byte
	for _, v := range vals {
		out = binary.AppendUvarint(out, uint64(len(v)))
		binary.LittleEndian.PutUint32(le[:], uint32(len(v)))
		crc = crc32.Update(crc, castagnoli, le[:])
	}
	binary.LittleEndian.PutUint32(le[:], MaskCRC(crc))
	out = append(out, le[:]...)
	crc = crc32.Update(crc, castagnoli, le[:])
	for _, v := range vals {
		out = append(out, v...)
		crc = crc32.Update(crc, castagnoli, []byte(v))
	}
	return out, crc
}
