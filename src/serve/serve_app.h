// `megaton serve`: an HTTP server for a TP x PP model replica (http_front.h lists the routes). Global rank 0 runs the
// HTTP front; every rank runs the decoding loop: rank 0 takes the queued requests that fit --max-batch-size rows,
// sends the batch to the other ranks, all decode it together (decode_batch.h), and rank 0 answers each request.
// While no request waits, rank 0 sends an idle message every second, so the other ranks' collectives never reach
// --distributed-timeout-minutes. SIGINT or SIGTERM to rank 0 (a lone process, or srun's signal to every task) stops
// it: queued requests get 503, the batch in flight is answered, and every rank exits 0.
#pragma once
#include "dist/launch_env.h"
#include "serve/blocked_signals.h"
#include "serve/serve_options.h"

namespace megaton::serve {

/// Collective over the job; returns when the server stops. `signals` were blocked before MPI started its threads.
int run_serve_app(const ServeOptions& o, const dist::LaunchEnv& env, BlockedStopSignals& signals);

}  // namespace megaton::serve
