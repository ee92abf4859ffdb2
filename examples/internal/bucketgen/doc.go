// Package bucketgen builds the sample model bucket of examples/: versioned
// pCTR and pCVR SavedModels and their model_config.json.
package bucketgen
