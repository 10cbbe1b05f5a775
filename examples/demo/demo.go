// Package demo holds the imposters `riftgate start --demo` loads (and
// `make run` uses): a small customers API showing predicates and a default
// response, and an unreliable service showing repeat, wait and faults.
package demo

import _ "embed" // for go:embed

// Imposters is imposters.json: `{"imposters":[...]}` in Mountebank's format.
//
//go:embed imposters.json
var Imposters []byte
