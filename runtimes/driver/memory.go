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
