package collect

import (
	"context"
	"errors"
	"net"
	"sync"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// client-go's port-forward closes its listeners when its context ends and
// again when it stops; the second close logs "Error closing listener …
// use of closed network connection" on stderr after every live command.
// That one error is dropped; every other unhandled error is still logged.
var quietOnce sync.Once

func quietClosedListeners() {
	for i, h := range utilruntime.ErrorHandlers {
		utilruntime.ErrorHandlers[i] = func(ctx context.Context, err error, msg string, kv ...any) {
			if msg == "Error closing listener" && errors.Is(err, net.ErrClosed) {
				return
			}
			h(ctx, err, msg, kv...)
		}
	}
}
