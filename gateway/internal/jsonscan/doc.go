// Package jsonscan walks JSON text that [Valid] (which agrees with
// [encoding/json.Valid]) accepted, without decoding it: the gateway's
// scans of frames and bodies, which find an object's members and copy
// their values as they are.
package jsonscan
