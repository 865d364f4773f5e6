package failure

//go:generate go run ./gencodes -o ../docs/failure-codes.md
