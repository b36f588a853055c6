package protodec

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Options are the operator's proto files, added to the built-in set.
type Options struct {
	// ProtoDirs are directories of .proto files (--proto). Every .proto
	// file under each is compiled, named by its path relative to the
	// directory; imports resolve in these directories, then in the
	// built-in set (gogoproto, cosmos_proto, the SDK's own files) and
	// protobuf's standard files.
	ProtoDirs []string
	// DescriptorSets are files holding a FileDescriptorSet
	// (--proto-descriptors; protoc --descriptor_set_out, buf build -o),
	// zstd-compressed or not. Imports missing from a set resolve in the
	// built-in set.
	DescriptorSets []string
}

// Load returns the built-in set with opts' files added; with no files it
// is Builtin(). An operator's file replaces a built-in one of the same path,
// so a chain may bring its own version of an SDK module.
func Load(ctx context.Context, opts Options) (*Set, error) {
	base, err := Builtin()
	if err != nil {
		return nil, err
	}
	if len(opts.ProtoDirs) == 0 && len(opts.DescriptorSets) == 0 {
		return base, nil
	}
	user := new(protoregistry.Files)
	for _, dir := range opts.ProtoDirs {
		fds, err := compileDir(ctx, dir, user, base.files)
		if err != nil {
			return nil, err
		}
		for _, fd := range fds {
			if err := registerOnce(user, fd); err != nil {
				return nil, fmt.Errorf("%w: --proto %s: %v", ErrCompile, dir, err)
			}
		}
	}
	for _, file := range opts.DescriptorSets {
		if err := loadDescriptorSet(file, user, base.files); err != nil {
			return nil, err
		}
	}
	added := user.NumFiles()
	// The built-in files the operator's do not replace. A built-in file
	// that defines a name an operator's file of another path defines too is
	// left out: the operator's types win.
	base.files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if _, err := user.FindFileByPath(fd.Path()); err != nil {
			_ = user.RegisterFile(fd)
		}
		return true
	})
	return newSet(user, added), nil
}

func registerOnce(r *protoregistry.Files, fd protoreflect.FileDescriptor) error {
	if _, err := r.FindFileByPath(fd.Path()); err == nil {
		return nil
	}
	return r.RegisterFile(fd)
}

// compileDir compiles every .proto file under dir.
func compileDir(ctx context.Context, dir string, user, base *protoregistry.Files) ([]protoreflect.FileDescriptor, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("%w: --proto %s: %v", ErrProtoDir, dir, errors.Unwrap(err))
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%w: --proto %s: not a directory", ErrProtoDir, dir)
	}
	var files []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && strings.HasSuffix(p, ".proto") {
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: --proto %s: %v", ErrCompile, dir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: --proto %s: no .proto files", ErrCompile, dir)
	}
	sort.Strings(files)
	known := func(path string) (protocompile.SearchResult, error) {
		for _, r := range []*protoregistry.Files{user, base} {
			if fd, err := r.FindFileByPath(path); err == nil {
				return protocompile.SearchResult{Desc: fd}, nil
			}
		}
		return protocompile.SearchResult{}, protoregistry.NotFound
	}
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(protocompile.CompositeResolver{
			&protocompile.SourceResolver{ImportPaths: []string{dir}},
			protocompile.ResolverFunc(known),
		}),
	}
	res, err := c.Compile(ctx, files...)
	if err != nil {
		return nil, fmt.Errorf("%w: --proto %s: %v", ErrCompile, dir, err)
	}
	out := make([]protoreflect.FileDescriptor, len(res))
	for i, f := range res {
		out[i] = f
	}
	return out, nil
}

// loadDescriptorSet links the files of a FileDescriptorSet into user.
func loadDescriptorSet(file string, user, base *protoregistry.Files) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("%w: --proto-descriptors %s: %v", ErrDescriptorSet, file, err)
	}
	if len(raw) >= 4 && string(raw[:4]) == "\x28\xb5\x2f\xfd" { // zstd
		dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(256<<20))
		if err != nil {
			return err
		}
		raw, err = dec.DecodeAll(raw, nil)
		dec.Close()
		if err != nil {
			return fmt.Errorf("%w: --proto-descriptors %s: %v", ErrDescriptorSet, file, err)
		}
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(raw, &set); err != nil {
		return fmt.Errorf("%w: --proto-descriptors %s: not a FileDescriptorSet: %v", ErrDescriptorSet, file, err)
	}
	if len(set.File) == 0 {
		return fmt.Errorf("%w: --proto-descriptors %s: no files", ErrDescriptorSet, file)
	}
	byPath := map[string]*descriptorpb.FileDescriptorProto{}
	for _, f := range set.File {
		byPath[f.GetName()] = f
	}
	r := chained{user, base}
	var link func(path string, stack []string) error
	link = func(path string, stack []string) error {
		if _, err := user.FindFileByPath(path); err == nil {
			return nil
		}
		fdp := byPath[path]
		if fdp == nil {
			if _, err := base.FindFileByPath(path); err == nil {
				return nil
			}
			return fmt.Errorf("%s imports %s, which neither the set nor the built-in files hold", stack[len(stack)-1], path)
		}
		for _, s := range stack {
			if s == path {
				return fmt.Errorf("import cycle at %s", path)
			}
		}
		for _, dep := range fdp.GetDependency() {
			if err := link(dep, append(stack, path)); err != nil {
				return err
			}
		}
		fd, err := protodesc.NewFile(fdp, r)
		if err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		return user.RegisterFile(fd)
	}
	for _, f := range set.File {
		if err := link(f.GetName(), nil); err != nil {
			return fmt.Errorf("%w: --proto-descriptors %s: %v", ErrDescriptorSet, file, err)
		}
	}
	return nil
}

// chained resolves in user's files first, then base's.
type chained struct{ user, base *protoregistry.Files }

func (c chained) FindFileByPath(p string) (protoreflect.FileDescriptor, error) {
	if fd, err := c.user.FindFileByPath(p); err == nil {
		return fd, nil
	}
	return c.base.FindFileByPath(p)
}

func (c chained) FindDescriptorByName(n protoreflect.FullName) (protoreflect.Descriptor, error) {
	if d, err := c.user.FindDescriptorByName(n); err == nil {
		return d, nil
	}
	d, err := c.base.FindDescriptorByName(n)
	if errors.Is(err, protoregistry.NotFound) {
		return nil, err
	}
	return d, err
}
