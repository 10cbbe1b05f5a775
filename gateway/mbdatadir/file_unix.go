//go:build unix

package mbdatadir

import (
	"io/fs"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// writeFile and renameFile are os.WriteFile and os.Rename through plain
// system calls: a recording writes two files a stub, and os.OpenFile's
// readying of a file for the poller (four fcntl, an epoll_ctl that a
// regular file refuses) and os.Rename's look at the target first were
// most of the calls a file made.
func writeFile(path string, data []byte) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			_ = unix.Close(fd)
			return &fs.PathError{Op: "write", Path: path, Err: err}
		}
		data = data[n:]
	}
	if err := unix.Close(fd); err != nil {
		return &fs.PathError{Op: "close", Path: path, Err: err}
	}
	return nil
}

// readFile is os.ReadFile through plain system calls, for the same
// reason: a start reads two files a stub (open, fstat, read and close
// here, where os.ReadFile made about ten calls).
func readFile(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	// Room past the size: a read that does not fill the buffer is the
	// end of a regular file, which spares the read that would say so.
	buf := make([]byte, 0, max(st.Size, 0)+512)
	for {
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		buf = buf[:len(buf)+n]
		if n == 0 || len(buf) < cap(buf) {
			return buf, nil
		}
		buf = slices.Grow(buf, cap(buf))
	}
}

func renameFile(from, to string) error {
	if err := unix.Rename(from, to); err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}
