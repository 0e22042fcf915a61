#!/usr/bin/env python3
# Model of the interleaved 1F1B schedule (src/parallel/pipeline/schedules.cpp, Megatron's
# forward_backward_pipelining_with_interleaving): builds every rank's sequence of communication steps, then checks that
# (1) the n-th message a rank sends to a peer is the n-th its peer expects from it (one tag, FIFO per pair) and (2) the
# steps complete under rendezvous sends (a message completes only when both sides have posted it). "split" is
# megaton's way (forward-ring send_recv, then backward-ring send_recv); "combined" is Megatron's batched 4-way op, which
# mismatches messages at PP = 2 (expected, printed as a note). Exit 1 if the split schedule fails anywhere.
import itertools, sys
# Megatron's forward_backward_pipelining_with_interleaving: per-rank sequence of comm steps.
# A step is a list of ops: ('send', peer, kind) / ('recv', peer, kind); kind = ('F'|'B', chunk, mb) of the payload.
def schedule(PP, V, M, r, split, forward_only=False):
    N = M * V
    all_warm = False
    if forward_only: warm = N
    elif M == PP: warm = N; all_warm = True
    else: warm = min((PP - r - 1) * 2 + (V - 1) * PP, N)
    rem = N - warm
    def cid(k, fwd):
        g = k % (PP * V); c = g // PP
        return c if fwd else V - c - 1
    def mbid(k): return (k // (PP * V)) * PP + k % PP
    nxt, prv = (r + 1) % PP, (r - 1) % PP
    steps = []
    def comm(send_f, send_b, recv_p, recv_n):
        ops = {}
        if send_f is not None: ops['sf'] = ('send', nxt, send_f)
        if recv_p is not None: ops['rp'] = ('recv', prv, recv_p)
        if send_b is not None: ops['sb'] = ('send', prv, send_b)
        if recv_n is not None: ops['rn'] = ('recv', nxt, recv_n)
        if split:
            s1 = [ops[k] for k in ('rp', 'sf') if k in ops]; s2 = [ops[k] for k in ('rn', 'sb') if k in ops]
            if s1: steps.append(s1)
            if s2: steps.append(s2)
        else:
            s = [ops[k] for k in ('sb', 'rp', 'sf', 'rn') if k in ops]
            if s: steps.append(s)
    # expected payload identity of what we receive: forward input of (chunk, mb) for this rank's chunk c
    # the sender's output of virtual stage (c*PP + r) - 1. Identify by (F, virtual_stage_of_sender, mb)
    def vs(c): return c * PP + r
    last_virtual = lambda c: r == PP - 1 and c == V - 1
    first_virtual = lambda c: r == 0 and c == 0
    recv_fq = {c: [] for c in range(V)}
    # initial recv_forward for chunk 0
    if r != 0: steps.append([('recv', prv, ('F', vs(0) - 1, 0))])
    fwd_count = [0] * V; bwd_count = [0] * V
    def out_f(k):
        c = cid(k, True); return None if last_virtual(c) else ('F', vs(c), mbid(k))
    def out_b(k):
        c = cid(k, False); return None if first_virtual(c) else ('B', vs(c), mbid(k))
    for k in range(warm):
        c_next = cid(k + 1, True)
        recv_prev = not (r == 0 and c_next == 0) and k != N - 1
        rp = ('F', vs(c_next) - 1, mbid(k + 1)) if recv_prev else None
        if k == warm - 1 and not forward_only and not all_warm:
            recv_next = r != PP - 1
            rn = ('B', vs(V - 1) + 1, 0) if recv_next else None
            comm(out_f(k), None, rp, rn)
        else:
            comm(out_f(k), None, rp, None)
    for k in range(rem):
        fk = k + warm; bk = k
        recv_prev = True
        if r == 0:
            nf = cid(fk - (PP - 1), True)
            if nf == V - 1: recv_prev = False
            nf += 1
        else: nf = cid(fk + 1, True)
        recv_next = True
        if r == PP - 1:
            nb = cid(bk - (PP - 1), False)
            if nb == 0: recv_next = False
            nb -= 1
        else: nb = cid(bk + 1, False)
        if k == rem - 1: recv_prev = False
        rp = ('F', vs(nf) - 1, mbid(fk + 1)) if recv_prev else None
        rn = ('B', vs(nb) + 1, mbid(bk + 1)) if recv_next else None
        comm(out_f(fk), out_b(bk), rp, rn)
    if not forward_only:
        if all_warm and r != PP - 1: steps.append([('recv', nxt, ('B', vs(V - 1) + 1, 0))])
        for k in range(rem, N):
            nb = cid(k + 1, False)
            recv_next = not (r == PP - 1 and nb == V - 1) and k != N - 1
            rn = ('B', vs(nb) + 1, mbid(k + 1)) if recv_next else None
            comm(None, out_b(k), None, rn)
    return steps

def check(PP, V, M, split, forward_only=False):
    S = [schedule(PP, V, M, r, split, forward_only) for r in range(PP)]
    # FIFO matching per ordered pair (single tag)
    sends = {}; recvs = {}
    for r in range(PP):
        for i, st in enumerate(S[r]):
            for op in st:
                if op[0] == 'send': sends.setdefault((r, op[1]), []).append((i, op[2]))
                else: recvs.setdefault((op[1], r), []).append((i, op[2]))
    msgs = []
    for key in set(sends) | set(recvs):
        a = sends.get(key, []); b = recvs.get(key, [])
        if len(a) != len(b): return 'count mismatch %s %d %d' % (key, len(a), len(b))
        for (i, pa), (j, pb) in zip(a, b):
            if pa != pb: return 'payload mismatch %s %s %s' % (key, pa, pb)
            msgs.append((key[0], i, key[1], j))
    # synchronous progress
    cur = [0] * PP
    done = set()
    while True:
        prog = False
        for m in msgs:
            if m in done: continue
            a, i, b, j = m
            if cur[a] == i and cur[b] == j: done.add(m); prog = True
        for r in range(PP):
            if cur[r] < len(S[r]):
                need = [m for m in msgs if (m[0] == r and m[1] == cur[r]) or (m[2] == r and m[3] == cur[r])]
                if all(m in done for m in need): cur[r] += 1; prog = True
        if all(cur[r] == len(S[r]) for r in range(PP)): return 'ok'
        if not prog: return 'deadlock at %s' % cur

bad = 0
for PP in range(2, 7):
    for V in range(1, 5):
        for M in range(PP, 4 * PP + 1, PP):
            for fo in (False, True):
                res = check(PP, V, M, True, fo)
                if res != 'ok':
                    bad += 1
                    print('FAIL PP=%d V=%d M=%d %s: %s' % (PP, V, M, 'forward-only' if fo else 'training', res))
                if PP == 2 and V == 2 and M == 4 and not fo:
                    print('note: Megatron\'s combined 4-way op at PP=2:', check(PP, V, M, False, fo))
print('interleaved schedule model: %s' % ('FAIL' if bad else 'ok (PP 2..6, V 1..4, M = PP..4PP, train + forward-only)'))
sys.exit(1 if bad else 0)
