// Package fault marks errors with the kind of fault they are, where they
// are made, so that what to do about one — retry it, and which exit status
// a job ends with — is read from the mark rather than from a list of error
// types kept somewhere else. It is Pebble's corruption mark
// (base.MarkCorruptionError, IsCorruptionError) and pgx's SafeToRetry made
// one vocabulary for the whole program.
//
// An error is marked in one of two ways: a type declares its class with a
// Fault() Class method, or Mark wraps a value. Marks keep the chain intact
// (Unwrap), so errors.Is and errors.As see through them. Of reads the
// outermost mark: a layer that knows more (a retry loop that spent its
// budget) marks over what it wraps.
package fault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"syscall"
)

// Class is the kind of a fault.
type Class uint8

// The classes. The zero value, Failed, is every error nobody marked.
const (
	// Failed is a runtime failure that another attempt now is not expected
	// to cure: a transient fault whose retries are spent, or an error
	// nobody marked. Exit status 1.
	Failed Class = iota
	// Transient may succeed if the same thing is tried again (a timeout, a
	// reset connection, throttling, a 5xx, an answer cut short). Retried
	// within a bound; exit status 1 once the bound is spent.
	Transient
	// Unsound is an answer that fails verification (a block whose hash is
	// not its own, a height not the one asked for): retried, since another
	// attempt or another node may answer soundly; once the retries are
	// spent, data that is wrong (exit status 4).
	Unsound
	// Config is a request that cannot be carried out as given: a flag, a
	// path, a range or a target that is wrong. Retrying cannot fix it.
	// Exit status 2.
	Config
	// Interrupted is work stopped part way by a signal or its caller's
	// cancellation; it resumes from its checkpoint. Exit status 3.
	Interrupted
	// Data is data that is wrong: a corrupt or damaged record, a
	// continuity break, another chain's blocks, a row that does not decode.
	// Exit status 4.
	Data
)

func (c Class) String() string {
	switch c {
	case Failed:
		return "failed"
	case Transient:
		return "transient"
	case Unsound:
		return "unsound"
	case Config:
		return "configuration"
	case Interrupted:
		return "interrupted"
	case Data:
		return "data"
	}
	return fmt.Sprintf("fault.Class(%d)", uint8(c))
}

// Exit statuses, one per class: a job's status is ExitStatus(Of(err)).
const (
	ExitComplete    = 0
	ExitFailed      = 1
	ExitConfig      = 2
	ExitInterrupted = 3
	ExitData        = 4
)

// ExitStatus is the process exit status of a job that ended with err.
func ExitStatus(err error) int {
	if err == nil {
		return ExitComplete
	}
	switch Of(err) {
	case Config:
		return ExitConfig
	case Interrupted:
		return ExitInterrupted
	case Data, Unsound:
		return ExitData
	}
	return ExitFailed
}

// Marker is implemented by error types that declare their own class.
type Marker interface {
	error
	Fault() Class
}

// marked is an error wrapped with a class.
type marked struct {
	err   error
	class Class
}

func (m *marked) Error() string { return m.err.Error() }
func (m *marked) Unwrap() error { return m.err }
func (m *marked) Fault() Class  { return m.class }

// Mark returns err marked as c (nil for a nil err). The message is err's.
func Mark(err error, c Class) error {
	if err == nil {
		return nil
	}
	return &marked{err: err, class: c}
}

// Errorf is fmt.Errorf marked as c.
func Errorf(c Class, format string, args ...any) error {
	return Mark(fmt.Errorf(format, args...), c)
}

// Of returns err's class: the outermost mark in its chain; unmarked, the
// class of what the standard library reports (a cancelled context is
// Interrupted; a path the process may not use — permission denied — is
// Config; a network timeout, a reset or refused connection, a broken pipe
// or a body cut short is Transient); otherwise Failed. A context
// deadline is not Transient: it is the caller's own bound (an attempt's
// own timeout is marked Transient by the code that set it).
func Of(err error) Class {
	if err == nil {
		return Failed
	}
	var m Marker
	if errors.As(err, &m) {
		return m.Fault()
	}
	if errors.Is(err, context.Canceled) {
		return Interrupted
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Failed
	}
	if errors.Is(err, fs.ErrPermission) {
		return Config
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return Transient
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF) {
		return Transient
	}
	return Failed
}

// Is reports whether err's class is c.
func Is(err error, c Class) bool { return err != nil && Of(err) == c }

// Retryable reports whether err is worth trying again: its class is
// Transient or Unsound. A retry loop that gives up returns Spent(err, n),
// which is not, so that no loop around it retries the same request again.
func Retryable(err error) bool {
	c := Of(err)
	return err != nil && (c == Transient || c == Unsound)
}

// Attempts returns the attempts made by a retry budget spent on err: err
// holds a Spent error, or an error that says it spent a budget of its own
// (a method SpentAttempts() int). ok is false when no budget was spent.
func Attempts(err error) (n int, ok bool) {
	var s interface{ SpentAttempts() int }
	if errors.As(err, &s) {
		return s.SpentAttempts(), true
	}
	return 0, false
}

// SpentError is a transient fault whose retry budget ran out.
type SpentError struct {
	Attempts int
	Err      error // the last attempt's error
}

func (e *SpentError) Error() string {
	return fmt.Sprintf("%v (after %d attempts)", e.Err, e.Attempts)
}
func (e *SpentError) Unwrap() error { return e.Err }

// SpentAttempts is the attempts made (see Attempts).
func (e *SpentError) SpentAttempts() int { return e.Attempts }

// Fault reports the class of what the attempts kept failing with, once
// retrying is over: a Transient fault is Failed now, an Unsound answer
// given every time is Data.
func (e *SpentError) Fault() Class {
	switch c := Of(e.Err); c {
	case Transient:
		return Failed
	case Unsound:
		return Data
	default:
		return c
	}
}

// Spent marks err, the last error of attempts tries, as a fault whose
// retries are spent: no outer loop retries it, and the message says how
// many attempts were made.
func Spent(err error, attempts int) error {
	if err == nil {
		return nil
	}
	return &SpentError{Attempts: attempts, Err: err}
}
