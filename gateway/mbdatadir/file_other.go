//go:build !unix

package mbdatadir

import "os"

// readFile, writeFile and renameFile are os's; file_unix.go says why they
// do not go through os there.
func readFile(path string) ([]byte, error) { return os.ReadFile(path) }

func writeFile(path string, data []byte) error { return os.WriteFile(path, data, 0o644) }

func renameFile(from, to string) error { return os.Rename(from, to) }
