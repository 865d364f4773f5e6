package httpapi

import _ "embed" // the contract

// openAPIDocument is the daemon API's OpenAPI 3.1 contract, served at
// GET /v1/openapi.json. This file is its one source; docs/openapi.json is
// a copy for readers of the manual, written by `go generate` and held equal
// to it by TestContractIsServed.
//
//go:generate cp openapi.json ../../../docs/openapi.json
//go:embed openapi.json
var openAPIDocument []byte
