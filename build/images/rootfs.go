package images

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// RootfsImage is an image of one layer holding a whole root filesystem (a Debian system
// made by debootstrap, say), for platform. The layer's tar is written to layerFile and
// gzipped at the fastest level as it is read.
func RootfsImage(rootfs, layerFile string, platform v1.Platform, cfg Image) (v1.Image, error) {
	if err := writeRootfsTar(rootfs, layerFile, cfg.Created); err != nil {
		return nil, fmt.Errorf("layer of %s: %w", rootfs, err)
	}
	layer, err := tarball.LayerFromFile(layerFile, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	out := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	out = mutate.ConfigMediaType(out, types.OCIConfigJSON)
	if out, err = mutate.Append(out, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: cfg.Created}, CreatedBy: "kiln-images --rootfs",
	}}); err != nil {
		return nil, err
	}
	return withConfig(out, cfg, platform)
}

// writeRootfsTar writes the tree under root as a tar: entries in WalkDir's (lexical) order,
// owners, modes and link targets as on disk, every time stamped at, a file linked twice
// stored once and then as a hard link. Device nodes, sockets and pipes are left out: the
// runtime makes /dev.
func writeRootfsTar(root, file string, at time.Time) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	links := map[uint64]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, _ := info.Sys().(*syscall.Stat_t)
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: int64(info.Mode().Perm()), ModTime: at, Format: tar.FormatPAX}
		if info.Mode()&fs.ModeSetuid != 0 {
			hdr.Mode |= 0o4000
		}
		if info.Mode()&fs.ModeSetgid != 0 {
			hdr.Mode |= 0o2000
		}
		if info.Mode()&fs.ModeSticky != 0 {
			hdr.Mode |= 0o1000
		}
		if st != nil {
			hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
		}
		switch {
		case info.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		case info.Mode().IsRegular():
			if st != nil && st.Nlink > 1 {
				if first, ok := links[st.Ino]; ok {
					hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
					return tw.WriteHeader(hdr)
				}
				links[st.Ino] = hdr.Name
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, info.Size()
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			src, err := os.Open(path)
			if err != nil {
				return err
			}
			defer src.Close()
			_, err = io.Copy(tw, src)
			return err
		default:
			return nil
		}
		return tw.WriteHeader(hdr)
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
