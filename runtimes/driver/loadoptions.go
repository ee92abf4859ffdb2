package driver

import "context"

// LoadOptions are one model's own load settings, carried by its
// registration (a model_metadata entry's fields) rather than by the
// runtime config: they reach Backend.Load and DiskLoader.LoadDisk in the
// load's context (WithLoadOptions, LoadOptionsFrom), which keeps the
// Backend interface as it is. The zero value is a model without any.
type LoadOptions struct {
	// Checksum is the model's checksum as the model_metadata config
	// computes it (modelfiles.Checksum of the files loaded): the key prefix
	// of its rows in a store, so two versions never read each other's.
	Checksum string
	// ExternalVariables maps checkpoint variable names (as `inferctl
	// variables` lists them) to the store serving their rows,
	// redis-cluster://host:port[,host:port...]. Only a backend that is an
	// ExternalVariableLoader serves them; the portable layer refuses them
	// for any other.
	ExternalVariables map[string]string
}

// IsZero reports whether o sets nothing.
func (o LoadOptions) IsZero() bool { return o.Checksum == "" && len(o.ExternalVariables) == 0 }

type loadOptionsKey struct{}

// WithLoadOptions returns ctx carrying o for the load it is passed to.
func WithLoadOptions(ctx context.Context, o LoadOptions) context.Context {
	return context.WithValue(ctx, loadOptionsKey{}, o)
}

// LoadOptionsFrom returns the options ctx carries (the zero value when
// none).
func LoadOptionsFrom(ctx context.Context) LoadOptions {
	o, _ := ctx.Value(loadOptionsKey{}).(LoadOptions)
	return o
}

// ExternalVariableLoader is a Backend that serves LoadOptions.
// ExternalVariables (TensorFlow: gathers on such a variable fetch rows from
// the store). ExternalVariableStats reports the stores' local caches.
type ExternalVariableLoader interface {
	ExternalVariableStats() []StoreStats
}

// StoreStats are one store's cache counters since the backend opened it.
type StoreStats struct {
	// URL names the store as the model_metadata entry does.
	URL          string
	Hits, Misses int64
}
