package gateway

import (
	"encoding/json"
)

// The JSON bodies the gateway writes: an error body, the same over HTTP
// and inside a WebSocket res frame.

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details any    `json:"details,omitempty"`
}

type errorEnvelope struct {
	Error     errorBody `json:"error"`
	RequestID string    `json:"request_id,omitempty"`
}

func (e *apiError) body() errorBody {
	return errorBody{Code: e.code.String(), Message: e.message, Details: e.details}
}

// appendErrorJSON appends e's HTTP error body to b.
func appendErrorJSON(b []byte, e *apiError, requestID string) []byte {
	out, err := json.Marshal(errorEnvelope{Error: e.body(), RequestID: requestID})
	if err != nil { // details that do not encode: drop them
		out, _ = json.Marshal(errorEnvelope{Error: errorBody{Code: e.code.String(), Message: e.message}, RequestID: requestID})
	}
	return append(b, out...)
}
