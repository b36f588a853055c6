package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

const pebbleModule = "github.com/cockroachdb/pebble/v2"

// buildCommit is the commit a build without Go's VCS stamping was made
// from, set by the linker (-ldflags "-X main.buildCommit=SHA"): the image's
// build, whose context holds no .git, is given it as the build argument
// COMMIT (scripts/image.sh), "+modified" appended when the checkout had
// uncommitted changes. Go's own stamping wins where there is one.
var buildCommit string

// moduleVersion is the main module's version as the Go toolchain stamped
// it: a tag, a pseudo-version from the commit, or (devel).
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// versionText is what `blockhaul version` and --version print.
func versionText() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = &debug.BuildInfo{GoVersion: runtime.Version()}
	}
	return formatVersion(bi, runtime.GOOS+"/"+runtime.GOARCH, buildCommit)
}

// formatVersion renders build information: the module version, the VCS
// commit (from -buildvcs stamping, else the commit given to the build), the
// Go and Pebble versions and how the binary was built (tags, cgo, and so
// Pebble's zstd).
func formatVersion(bi *debug.BuildInfo, platform, given string) string {
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "blockhaul %s\n", version)
	commit := "unknown (built without VCS stamping: go build -buildvcs=true in a git checkout, or make build; an image: make image)"
	if rev, modified := strings.CutSuffix(given, "+modified"); rev != "" {
		commit = rev + " (given to the build)"
		if modified {
			commit += ", with uncommitted changes"
		}
	}
	if rev := settings["vcs.revision"]; rev != "" {
		commit = rev
		if t := settings["vcs.time"]; t != "" {
			commit += " (" + t + ")"
		}
		if settings["vcs.modified"] == "true" {
			commit += ", with uncommitted changes"
		}
	}
	fmt.Fprintf(&b, "  commit:     %s\n", commit)
	fmt.Fprintf(&b, "  go:         %s %s\n", bi.GoVersion, platform)
	pebble := "unknown"
	for _, d := range bi.Deps {
		if d.Path == pebbleModule {
			pebble = d.Version
			if d.Replace != nil {
				pebble += " => " + d.Replace.Path + " " + d.Replace.Version
			}
		}
	}
	fmt.Fprintf(&b, "  pebble:     %s\n", pebble)
	tags := settings["-tags"]
	cgo := settings["CGO_ENABLED"]
	if cgo == "" {
		cgo = "unknown"
	}
	zstd := "cgo (libzstd)"
	if hasTag(tags, "pebblegozstd") || cgo == "0" {
		zstd = "pure Go"
	}
	shown := tags
	if shown == "" {
		shown = "none"
	}
	fmt.Fprintf(&b, "  build tags: %s\n", shown)
	fmt.Fprintf(&b, "  cgo:        %s (Pebble's zstd: %s)\n", cgo, zstd)
	return b.String()
}

func hasTag(tags, tag string) bool {
	for _, t := range strings.Split(tags, ",") {
		if t == tag {
			return true
		}
	}
	return false
}
