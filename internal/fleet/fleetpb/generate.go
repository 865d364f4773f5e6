// Package fleetpb holds the protobuf messages forged's fleet members
// exchange (fleet.proto), generated with protoc and protoc-gen-go.
package fleetpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative fleet.proto
