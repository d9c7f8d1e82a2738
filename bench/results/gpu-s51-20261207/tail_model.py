"""A list-scheduling model of the sm80 backward's grid (fifty-first session): blocks issued in
grid order to S SM slots, each taking as long as its query-tile steps (one per query tile its key
tile reaches; every step the same time). For DESIGN.md's grid (batch = 16384 / seqlen, heads =
2048 / hdim, causal), head dims 64 / 128 / 256 with the sm80 backward's tiles, a 50 MiB L2 and 132
slots (an H100 / H200, one block per SM), it prints each grid order's makespan over the plain
key-tile-major order's: groups = groups of G units that fit half the L2, the remainder last (the
fiftieth session's order); auto = the same with a last group of at least
kernel_traits.hpp grid_last_group_min units (this session's). The model has no memory: it says
what the order costs in idle SMs at the end, not what the groups save in L2 misses.
    python3 tail_model.py"""
import heapq


def makespan(durations, slots):
    h = [0] * slots
    for d in durations:
        heapq.heappush(h, heapq.heappop(h) + d)
    return max(h)


def orders(hd, seqlen, causal, slots=132, l2=50 << 20):
    bm = 128 if hd <= 64 else 64
    bn = 128 if hd <= 128 else 64
    nb, mq = -(-seqlen // bn), -(-seqlen // bm)
    units = (16384 // seqlen) * (2048 // hd)
    G = max(1, min(units, (l2 // 2) // (seqlen * hd * (2 * 2 + 4))))  # bwd_group_units, bwd_unit_bytes

    def steps(n):  # query tiles key tile n reaches (bottom-right causal, Sq = Sk)
        return mq - (n * bn) // bm if causal else mq

    per_unit, longest = sum(steps(n) for n in range(nb)), steps(0)
    last_min = -(-longest * slots // per_unit) if causal else 0  # grid_last_group_min
    k_groups = units // G
    k_auto = min(k_groups, (units - last_min) // G if units > last_min else 0)  # grid_full_groups

    def grouped(k):
        out, u = [], 0
        for _ in range(k):
            out += [steps(n) for n in range(nb) for _ in range(G)]
            u += G
        return out + [steps(n) for n in range(nb) for _ in range(units - u)]

    tile = makespan(grouped(0), slots)
    return G, units - k_auto * G, makespan(grouped(k_groups), slots) / tile, makespan(grouped(k_auto), slots) / tile


print("hdim seqlen causal | G | last group (auto) | groups / tile | auto / tile")
for hd in (64, 128, 256):
    for seqlen in (1024, 2048, 4096, 16384):
        for causal in (0, 1):
            G, last, g, a = orders(hd, seqlen, causal)
            print(f"{hd} {seqlen} {causal} | {G} | {last} | {g:.3f} | {a:.3f}")


def forward(hd, seqlen, slots, l2=50 << 20):
    """The sm80 forward's masked grid: a block per 128-row query tile, a step per 64-key tile its
    rows see (causal: tile m takes 2m + 2); head order (each unit's tiles in turn, longest first:
    the order before this session) against groups of units whose K / V fit half the L2 with a
    last group of at least grid_last_group_min units (fwd_grouped_order)."""
    units, nm = (16384 // seqlen) * (2048 // hd), seqlen // 128
    G = max(1, min(units, (l2 // 2) // (2 * seqlen * hd * 2)))
    steps = [2 * m + 2 for m in range(nm)]
    last_min = -(-max(steps) * slots // sum(steps))
    k = min(units // G, (units - last_min) // G if units > last_min else 0)
    head = [s for _ in range(units) for s in reversed(steps)]
    grouped = [s for g in range(k) for s in reversed(steps) for _ in range(G)]
    grouped += [s for s in reversed(steps) for _ in range(units - k * G)]
    return G, units - k * G, makespan(grouped, slots) / makespan(head, slots)


print("\nforward, causal: hdim seqlen | slots | G | last group | groups / head order")
for hd, slots in ((64, 264), (128, 264), (256, 132)):  # two blocks per SM at 64 / 128, one at 256
    for seqlen in (1024, 2048, 4096, 16384):
        G, last, r = forward(hd, seqlen, slots)
        print(f"{hd} {seqlen} | {slots} | {G} | {last} | {r:.3f}")
