package driver

import (
	"fmt"
	"os"
	"syscall"
)

// MapFile maps all of f read-only (MAP_SHARED): what a DiskLoader reads a
// received file through without copying it into the heap (a preflight, a
// signature). An empty file is an empty slice. Call unmap once done; the
// pages stay in the page cache.
func MapFile(f *os.File) (data []byte, unmap func(), err error) {
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if st.Size() == 0 {
		return []byte{}, func() {}, nil
	}
	if st.Size() != int64(int(st.Size())) {
		return nil, nil, fmt.Errorf("%d bytes do not fit in memory", st.Size())
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("map %s: %w", f.Name(), err)
	}
	return data, func() { syscall.Munmap(data) }, nil
}
