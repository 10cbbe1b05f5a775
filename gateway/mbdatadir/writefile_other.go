//go:build !unix

package mbdatadir

import "os"

// writeFile and renameFile are os's; writefile_unix.go says why they do
// not go through os there.
func writeFile(path string, data []byte) error { return os.WriteFile(path, data, 0o644) }

func renameFile(from, to string) error { return os.Rename(from, to) }
