// Package config is riftgate's imposter configuration as a pure value and
// the commands that change it.
//
// Every change to the configuration (the admin API, --configfile,
// --datadir loading, proxy recordings, PUT /plugins) is a Command: a value,
// validated and completed by its maker before it exists (a free port
// chosen, a module file read and hashed, predicates compiled to check
// them). Commands go through one Log. Apply reduces a State and a Command
// to the next State and a Result, deterministically: no clock, no random
// numbers, no IO. Replaying a log from the empty State reproduces the
// configuration, on one node or on every member of a cluster.
//
// A State is immutable once made: Apply copies what it changes and shares
// the rest, so a reader may keep a State while the next one is built.
//
// Both encodings are wire formats, pinned by golden tests: a command is a
// version byte and a CBOR body; a snapshot of a State is the magic "RGCS", a
// big-endian u16 version and a CBOR body.
package config
