// Package docs holds the documents the binaries serve: the daemon API's
// OpenAPI 3.1 contract (openapi.json, served at GET /v1/openapi.json by
// internal/daemon/httpapi), embedded so that the file in docs/ is the one
// source of what is served.
package docs

import _ "embed" // the contract

// OpenAPI is docs/openapi.json: the daemon API's OpenAPI 3.1 document.
//
//go:embed openapi.json
var OpenAPI []byte
