//go:build riftgate_recordings_v1

package cluster

// recordingsV1Only: see recordings_version.go.
const recordingsV1Only = true
