package tfsave

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/syndtr/goleveldb/leveldb/opt"
	"github.com/syndtr/goleveldb/leveldb/storage"
	"github.com/syndtr/goleveldb/leveldb/table"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	protopb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"google.golang.org/protobuf/proto"

	"github.com/inferbid/inferbid/tensor"
)

// bundleEntry is one index entry read back with goleveldb's table reader.
type bundleEntry struct {
	key   string
	raw   []byte // the BundleEntryProto bytes as stored
	entry *protopb.BundleEntryProto
}

// readBundle reads a variables.index independently of the writer: the
// table with goleveldb, the header and entries with the graft protos.
func readBundle(t *testing.T, index []byte) (*protopb.BundleHeaderProto, []byte, []bundleEntry) {
	t.Helper()
	r, err := table.NewReader(bytes.NewReader(index), int64(len(index)), storage.FileDesc{}, nil, nil, &opt.Options{Strict: opt.StrictAll})
	if err != nil {
		t.Fatalf("open index table: %v", err)
	}
	it := r.NewIterator(nil, &opt.ReadOptions{Strict: opt.StrictAll})
	defer it.Release()
	var header *protopb.BundleHeaderProto
	var headerRaw []byte
	var entries []bundleEntry
	for it.Next() {
		k, v := string(it.Key()), append([]byte(nil), it.Value()...)
		if k == "" {
			header = &protopb.BundleHeaderProto{}
			headerRaw = v
			if err := proto.Unmarshal(v, header); err != nil {
				t.Fatalf("header: %v", err)
			}
			continue
		}
		e := &protopb.BundleEntryProto{}
		if err := proto.Unmarshal(v, e); err != nil {
			t.Fatalf("entry %q: %v", k, err)
		}
		entries = append(entries, bundleEntry{key: k, raw: v, entry: e})
	}
	if err := it.Error(); err != nil {
		t.Fatalf("iterate index: %v", err)
	}
	if header == nil {
		t.Fatal("index has no header (empty key)")
	}
	return header, headerRaw, entries
}

// entryCRC recomputes an entry's CRC32C from the data file as TensorFlow's
// reader does, without the writer's helpers: raw bytes for numeric tensors;
// for strings, each length as a uint32, the stored length checksum, then
// the string bytes.
func entryCRC(t *testing.T, key string, e *protopb.BundleEntryProto, data []byte) (uint32, []string) {
	t.Helper()
	if e.Offset < 0 || e.Size < 0 || e.Offset+e.Size > int64(len(data)) {
		t.Fatalf("entry %q: offset %d size %d outside data of %d bytes", key, e.Offset, e.Size, len(data))
	}
	chunk := data[e.Offset : e.Offset+e.Size]
	tab := crc32.MakeTable(crc32.Castagnoli)
	if e.Dtype != typespb.DataType_DT_STRING {
		return crc32.Checksum(chunk, tab), nil
	}
	n := int64(1)
	for _, d := range e.Shape.GetDim() {
		n *= d.Size
	}
	var crc uint32
	lens := make([]uint64, n)
	pos := 0
	for i := range lens {
		l, w := binary.Uvarint(chunk[pos:])
		if w <= 0 {
			t.Fatalf("entry %q: bad varint length %d", key, i)
		}
		lens[i] = l
		pos += w
		var le [4]byte
		binary.LittleEndian.PutUint32(le[:], uint32(l))
		crc = crc32.Update(crc, tab, le[:])
	}
	lenCRC := binary.LittleEndian.Uint32(chunk[pos:])
	unmasked := lenCRC - 0xa282ead8
	unmasked = unmasked>>17 | unmasked<<15
	if unmasked != crc {
		t.Errorf("entry %q: length checksum %#x does not match the lengths (%#x)", key, unmasked, crc)
	}
	crc = crc32.Update(crc, tab, chunk[pos:pos+4])
	pos += 4
	var strs []string
	for _, l := range lens {
		strs = append(strs, string(chunk[pos:pos+int(l)]))
		crc = crc32.Update(crc, tab, chunk[pos:pos+int(l)])
		pos += int(l)
	}
	if pos != len(chunk) {
		t.Errorf("entry %q: %d trailing bytes after the strings", key, len(chunk)-pos)
	}
	return crc, strs
}

func unmask(c uint32) uint32 {
	r := c - 0xa282ead8
	return r>>17 | r<<15
}

// decodeNumeric turns checkpoint bytes back into a tensor.
func decodeNumeric(t *testing.T, e *protopb.BundleEntryProto, chunk []byte) tensor.Tensor {
	t.Helper()
	shape := []int64{}
	for _, d := range e.Shape.GetDim() {
		shape = append(shape, d.Size)
	}
	var data any
	switch e.Dtype {
	case typespb.DataType_DT_FLOAT:
		v := make([]float32, len(chunk)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(chunk[4*i:]))
		}
		data = v
	case typespb.DataType_DT_DOUBLE:
		v := make([]float64, len(chunk)/8)
		for i := range v {
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(chunk[8*i:]))
		}
		data = v
	case typespb.DataType_DT_INT32:
		v := make([]int32, len(chunk)/4)
		for i := range v {
			v[i] = int32(binary.LittleEndian.Uint32(chunk[4*i:]))
		}
		data = v
	case typespb.DataType_DT_INT64:
		v := make([]int64, len(chunk)/8)
		for i := range v {
			v[i] = int64(binary.LittleEndian.Uint64(chunk[8*i:]))
		}
		data = v
	case typespb.DataType_DT_INT16:
		v := make([]int16, len(chunk)/2)
		for i := range v {
			v[i] = int16(binary.LittleEndian.Uint16(chunk[2*i:]))
		}
		data = v
	case typespb.DataType_DT_INT8:
		v := make([]int8, len(chunk))
		for i := range v {
			v[i] = int8(chunk[i])
		}
		data = v
	default:
		t.Fatalf("unexpected dtype %s", e.Dtype)
	}
	return tensor.Tensor{Shape: shape, Data: data}
}

func TestBundleRoundTrip(t *testing.T) {
	in := []BundleTensor{
		{Key: "z/last", Tensor: tensor.New("", []int64{2, 3}, []float32{1, -2, 3.5, 0, 1e-30, -7})},
		{Key: "a/double", Tensor: tensor.New("", []int64{2}, []float64{math.Pi, -1})},
		{Key: "b/int8", Tensor: tensor.New("", []int64{3}, []int8{-128, 0, 127})},
		{Key: "b/int16", Tensor: tensor.New("", []int64{2}, []int16{-32768, 32767})},
		{Key: "c/int32", Tensor: tensor.New("", []int64{}, []int32{-5})},
		{Key: "c/int64", Tensor: tensor.New("", []int64{1, 1}, []int64{math.MinInt64})},
		{Key: "empty", Tensor: tensor.New("", []int64{0, 4}, []float32{})},
		{Key: "strings", Strings: []string{"", "hello", string(make([]byte, 300))}, StringShape: []int64{3}},
	}
	index, data, err := WriteBundle(in, BundleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	header, _, entries := readBundle(t, index)
	if header.NumShards != 1 || header.Endianness != protopb.BundleHeaderProto_LITTLE || header.GetVersion().GetProducer() != 1 {
		t.Errorf("header = %v", header)
	}
	if len(entries) != len(in) {
		t.Fatalf("%d entries, want %d", len(entries), len(in))
	}
	for i := 1; i < len(entries); i++ {
		if entries[i-1].key >= entries[i].key {
			t.Errorf("index keys not sorted: %q before %q", entries[i-1].key, entries[i].key)
		}
	}
	byKey := map[string]*protopb.BundleEntryProto{}
	for _, e := range entries {
		byKey[e.key] = e.entry
	}
	// Data is laid out in the order given, without padding.
	var off int64
	for _, want := range in {
		e := byKey[want.Key]
		if e == nil {
			t.Fatalf("key %q missing", want.Key)
		}
		if e.Offset != off {
			t.Errorf("%q: offset %d, want %d (data in the order given, no padding)", want.Key, e.Offset, off)
		}
		off += e.Size
		if e.ShardId != 0 {
			t.Errorf("%q: shard %d", want.Key, e.ShardId)
		}
		crc, strs := entryCRC(t, want.Key, e, data)
		if unmask(e.Crc32C) != crc {
			t.Errorf("%q: stored crc32c (unmasked) %#x, data has %#x", want.Key, unmask(e.Crc32C), crc)
		}
		if want.Strings != nil {
			if e.Dtype != typespb.DataType_DT_STRING || !slices.Equal(strs, want.Strings) {
				t.Errorf("%q: strings %q (dtype %s), want %q", want.Key, strs, e.Dtype, want.Strings)
			}
			continue
		}
		got := decodeNumeric(t, e, data[e.Offset:e.Offset+e.Size])
		if got.DType() != want.Tensor.DType() || tensor.FormatShape(got.Shape) != tensor.FormatShape(want.Tensor.Shape) {
			t.Errorf("%q: %s %s, want %s %s", want.Key, got.DType(), tensor.FormatShape(got.Shape), want.Tensor.DType(), tensor.FormatShape(want.Tensor.Shape))
		}
		if a, b := renderData(got.Data), renderData(want.Tensor.Data); a != b {
			t.Errorf("%q: data %s, want %s", want.Key, a, b)
		}
	}
	if off != int64(len(data)) {
		t.Errorf("entries cover %d bytes, data has %d", off, len(data))
	}
}

func TestBundleErrors(t *testing.T) {
	for name, in := range map[string][]BundleTensor{
		"empty key":    {{Key: "", Tensor: tensor.New("", []int64{1}, []float32{1})}},
		"duplicate":    {{Key: "a", Tensor: tensor.New("", []int64{1}, []float32{1})}, {Key: "a", Tensor: tensor.New("", []int64{1}, []float32{2})}},
		"bad shape":    {{Key: "a", Tensor: tensor.New("", []int64{2}, []float32{1})}},
		"bad type":     {{Key: "a", Tensor: tensor.Tensor{Shape: []int64{1}, Data: []uint8{1}}}},
		"string count": {{Key: "s", Strings: []string{"a"}, StringShape: []int64{2}}},
	} {
		if _, _, err := WriteBundle(in, BundleOptions{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestBundleMatchesTensorFlow rewrites each checkpoint TensorFlow wrote in
// the reference models from its own tensors and requires identical bytes:
// the index table (block layout, restarts, index keys, footer), the header,
// every entry's encoding and CRC, and the data file.
func TestBundleMatchesTensorFlow(t *testing.T) {
	dirs := referenceModelDirs(t)
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			index, err1 := os.ReadFile(filepath.Join(dir, VariablesIndex))
			data, err2 := os.ReadFile(filepath.Join(dir, VariablesData))
			if err1 != nil || err2 != nil {
				t.Fatalf("read reference checkpoint: %v %v", err1, err2)
			}
			_, headerRaw, entries := readBundle(t, index)
			wantHeader, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&protopb.BundleHeaderProto{NumShards: 1, Version: &versionDef1})
			if !bytes.Equal(headerRaw, wantHeader) {
				t.Errorf("reference header %x, tfsave writes %x", headerRaw, wantHeader)
			}
			// Re-add the tensors in the reference's data order.
			ordered := append([]bundleEntry(nil), entries...)
			sortByOffset(ordered)
			var tensors []BundleTensor
			for _, e := range ordered {
				crc, strs := entryCRC(t, e.key, e.entry, data)
				if unmask(e.entry.Crc32C) != crc {
					t.Fatalf("reference %q: our reading of its CRC disagrees: stored %#x, computed %#x", e.key, unmask(e.entry.Crc32C), crc)
				}
				bt := BundleTensor{Key: e.key}
				if e.entry.Dtype == typespb.DataType_DT_STRING {
					bt.Strings = strs
					for _, d := range e.entry.Shape.GetDim() {
						bt.StringShape = append(bt.StringShape, d.Size)
					}
				} else {
					bt.Tensor = decodeNumeric(t, e.entry, data[e.entry.Offset:e.entry.Offset+e.entry.Size])
				}
				tensors = append(tensors, bt)
			}
			// TensorFlow 1.x compressed index blocks where it paid; 2.x never.
			gotIndex, gotData, err := WriteBundle(tensors, BundleOptions{Snappy: strings.HasPrefix(readSavedModel(t, dir).MetaGraphs[0].MetaInfoDef.TensorflowVersion, "1.")})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(gotData, data) {
				t.Errorf("data file differs from TensorFlow's (%d vs %d bytes)", len(gotData), len(data))
			}
			if !bytes.Equal(gotIndex, index) {
				_, _, got := readBundle(t, gotIndex)
				for i := range got {
					if i < len(entries) && !bytes.Equal(got[i].raw, entries[i].raw) {
						t.Errorf("entry %q: tfsave %x, TensorFlow %x", got[i].key, got[i].raw, entries[i].raw)
					}
				}
				t.Errorf("index differs from TensorFlow's (%d vs %d bytes)", len(gotIndex), len(index))
			}
		})
	}
}

func sortByOffset(e []bundleEntry) {
	for i := 1; i < len(e); i++ {
		for j := i; j > 0 && e[j].entry.Offset < e[j-1].entry.Offset; j-- {
			e[j], e[j-1] = e[j-1], e[j]
		}
	}
}

// FuzzWriteBundle checks that whatever keys and values go in come back out
// of the index and data files with valid CRCs, or the writer refuses them.
func FuzzWriteBundle(f *testing.F) {
	f.Add("w", []byte{1, 2, 3, 4}, "s", "text")
	f.Add("a/b", []byte{}, "", "")
	f.Add("same", []byte{0, 0, 0, 0, 0, 0, 0, 0}, "same", "x")
	f.Fuzz(func(t *testing.T, k1 string, raw []byte, k2, s string) {
		vals := make([]float32, len(raw)/4)
		for i := range vals {
			vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		in := []BundleTensor{
			{Key: k1, Tensor: tensor.New("", []int64{int64(len(vals))}, vals)},
			{Key: k2, Strings: []string{s, k1}, StringShape: []int64{2}},
		}
		index, data, err := WriteBundle(in, BundleOptions{})
		if err != nil {
			if k1 != "" && k2 != "" && k1 != k2 {
				t.Fatalf("valid input refused: %v", err)
			}
			return
		}
		_, _, entries := readBundle(t, index)
		if len(entries) != 2 {
			t.Fatalf("%d entries", len(entries))
		}
		for _, e := range entries {
			crc, _ := entryCRC(t, e.key, e.entry, data)
			if unmask(e.entry.Crc32C) != crc {
				t.Fatalf("%q: crc mismatch", e.key)
			}
		}
	})
}

// TestBundleManyBlocks writes an index larger than one 256 KiB block, with
// and without snappy, and reads it back with goleveldb (checksums verified),
// including point lookups that go through the index block's separators.
func TestBundleManyBlocks(t *testing.T) {
	const n = 12000
	in := make([]BundleTensor, n)
	for i := range in {
		in[i] = BundleTensor{Key: fmt.Sprintf("model/layer_%05d/kernel/.ATTRIBUTES/VARIABLE_VALUE", (i*7919)%n), Tensor: tensor.New("", []int64{1}, []float32{float32(i)})}
	}
	for _, snappy := range []bool{false, true} {
		index, data, err := WriteBundle(in, BundleOptions{Snappy: snappy})
		if err != nil {
			t.Fatal(err)
		}
		if len(index) < 2*256<<10 && !snappy {
			t.Fatalf("index of %d bytes does not span several blocks", len(index))
		}
		_, _, entries := readBundle(t, index)
		if len(entries) != n {
			t.Fatalf("snappy=%v: %d entries, want %d", snappy, len(entries), n)
		}
		r, err := table.NewReader(bytes.NewReader(index), int64(len(index)), storage.FileDesc{}, nil, nil, &opt.Options{Strict: opt.StrictAll})
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{0, 1, n / 3, n - 1} {
			raw, err := r.Get([]byte(in[i].Key), nil)
			if err != nil {
				t.Fatalf("snappy=%v: Get %q: %v", snappy, in[i].Key, err)
			}
			var e protopb.BundleEntryProto
			if err := proto.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			got := decodeNumeric(t, &e, data[e.Offset:e.Offset+e.Size]).Data.([]float32)[0]
			if got != float32(i) {
				t.Errorf("snappy=%v: %q holds %v, want %d", snappy, in[i].Key, got, i)
			}
		}
	}
}

func TestTableSeparators(t *testing.T) {
	for _, c := range []struct{ start, limit, want string }{
		{"abc", "abz", "abd"},
		{"abc", "abd", "abc"},
		{"ab", "abc", "ab"},
		{"a\xff", "b", "a\xff"},
		{"abcdef", "abzz", "abd"},
	} {
		if got := string(shortestSeparator([]byte(c.start), []byte(c.limit))); got != c.want {
			t.Errorf("separator(%q, %q) = %q, want %q", c.start, c.limit, got, c.want)
		}
	}
	for _, c := range []struct{ key, want string }{{"abc", "b"}, {"\xff\xffx", "\xff\xffy"}, {"\xff", "\xff"}} {
		if got := string(shortSuccessor([]byte(c.key))); got != c.want {
			t.Errorf("successor(%q) = %q, want %q", c.key, got, c.want)
		}
	}
}
