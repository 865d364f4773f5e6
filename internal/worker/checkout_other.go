//go:build !linux

package worker

import (
	"io"
	"io/fs"
	"os"
)

// createFile creates full exclusively and writes data (or r's content).
// Off Linux no stat data is kept: the stat cache never trusts a file.
func createFile(full string, perm uint32, data []byte, r io.Reader) (fileStat, error) {
	f, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL, os.FileMode(perm))
	if err != nil {
		return fileStat{}, err
	}
	if r != nil {
		_, err = io.Copy(f, r)
	} else {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return fileStat{}, err
}

func lstatFile(full string) (fileStat, error) {
	_, err := os.Lstat(full)
	return fileStat{}, err
}

func statOf(fs.FileInfo) fileStat { return fileStat{} }
