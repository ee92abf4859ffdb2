package driver

// WeightMemory says how a model's weights are held: bytes served from a
// read-only memory mapping of the model's files (paged in as calls touch
// them, dropped by the kernel under pressure) and bytes copied into the
// process's heap.
type WeightMemory struct {
	MappedBytes, CopiedBytes int64
}

// WeightMemoryReporter is implemented by models that can tell how their
// weights are held (the TensorFlow runtime's, for its checkpoint).
type WeightMemoryReporter interface {
	WeightMemory() WeightMemory
}

// FileMapper is implemented by backends that serve some of a model's
// files from a memory mapping rather than the heap (the TensorFlow
// runtime's checkpoint data shards, when mapping is configured): the
// sidecar counts those against its mapped-model cap instead of the heap
// cap. name is the file's slash-separated path in the model.
type FileMapper interface {
	MapsFile(name string, size int64) bool
}
