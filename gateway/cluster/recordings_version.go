//go:build !riftgate_recordings_v1

package cluster

// recordingsV1Only makes a node serve and ask only version 1 of the
// recordings route, as builds before version 2 did: built with the tag
// riftgate_recordings_v1, for the tests of a rolling upgrade's mixed
// cluster (recordings_v1_process_test.go). Never in a release.
const recordingsV1Only = false
