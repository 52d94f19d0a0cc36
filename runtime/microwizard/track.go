package microwizard

import "context"

// trackKey is the ctx key of the Seneca track of the request a handler
// serves.
type trackKey struct{}

// withTrack returns ctx carrying track, the track of the Seneca request
// served with it: a call the handler makes with its ctx over Seneca's
// wire sends it on, with this node's id appended, as seneca-transport
// sends a forwarded message's transport$.track. The runtime hands a
// transport the caller's ctx (or one derived from it), so the handler's
// calls find it without copying metadata.
func withTrack(ctx context.Context, track []string) context.Context {
	if len(track) == 0 {
		return ctx
	}
	return context.WithValue(ctx, trackKey{}, track)
}

// Track returns the Seneca track of the request ctx serves: the instance
// ids it passed, the caller's last; nil when ctx serves none (or came
// from MicroWizard's wire, which has no track). It must not be changed.
// A call made with ctx over Seneca's wire carries it on with this node's
// id appended, so that a loop through a Go handler is refused where it
// closes, as Seneca refuses it.
func Track(ctx context.Context) []string {
	if ctx == nil {
		return nil
	}
	t, _ := ctx.Value(trackKey{}).([]string)
	return t
}

// outgoingTrack is the track of a call made with ctx by the instance id:
// the track ctx serves, then id.
func outgoingTrack(ctx context.Context, id string) []string {
	in := Track(ctx)
	out := make([]string, len(in), len(in)+1)
	copy(out, in)
	return append(out, id)
}
