package httpjson

import (
	"encoding/json"
	"net/http"
)

// Write answers with status code and v encoded as JSON (Content-Type
// application/json, '<', '>' and '&' left as they are, a newline at the
// end). An error encoding v is lost: the status is already written, and v
// is always a value of the module's own types.
func Write(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// Error answers with status code and the error object {"error": msg}, and
// returns code (handlers that record their status return it).
func Error(w http.ResponseWriter, code int, msg string) int {
	Write(w, code, map[string]string{"error": msg})
	return code
}
