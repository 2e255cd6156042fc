package api

// Request headers. Identity comes only from the bearer token; no other
// header is trusted for it.
const (
	HeaderAuthorization  = "Authorization"
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderProject        = "Gpuaas-Project"
	HeaderCorrelationID  = "Gpuaas-Correlation-Id"
)
