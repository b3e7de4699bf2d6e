/**
 * The send rate, learned from what the server accepted and refused. After TCP (slow start,
 * then congestion avoidance) and the AWS SDK's adaptive mode, with bounds on the quota that
 * come from counts over whole seconds rather than from the timing of single requests
 * (single timings on a loaded machine are off by tens of milliseconds; counts are not):
 * - unpaced: until the first 429 we have no rate of our own (the in-flight limit applies).
 *   The passes before it bound the server's burst (`burstHigh`). A run whose first request is
 *   refused met an emptied bucket: the segment after the pause goes out unpaced too and counts
 *   as the first (startedEmpty); once a run, a 429 below what the counts took as within the quota
 *   measures the capacity again that way (relearnCapacity).
 * - ramp: no rate has drawn a 429 yet. We start from the rate the server accepted over the
 *   last second and double it every RAMP_STEP_MS; the rate that draws a 429 (the fastest sent
 *   in its segment up to its send: rateThatDrew) is `high`.
 * - probe: the quota's rate lies in [low, high]. We send inside the bounds; a 429 lowers
 *   `high` to the rate that drew it, QUIET_MS without one raises `low` to it, so each
 *   step halves the gap. Once the gap is within TIGHT_SPAN, or worth less over the work left than
 *   a probe's pause (probeWorthAPause), we send just below `low` and stop probing (hold). A 429 in
 *   hold reopens the probe just below the rate that drew it.
 * - `low` also rises with what the server demonstrably accepted: passes since the last
 *   pause ended, less the most the bucket could have held then, over the time since.
 * - at each 429 the evidence (bucket-evidence.ts) replays every cycle through a token bucket
 *   of each rate and the capacities the run's first segment allows: the rates that fit bound
 *   the quota whatever its capacity. Within EVIDENCE_PROBE_SPAN, where 429s name no wait, we probe
 *   at their top (above the quota nothing is lost until the 429, whose long cycle then pins the rate).
 * - 429s naming no wait, where counts cannot tell (a bucket of more than the rate sends in QUIET_MS):
 *   a probe that went quiet moves on to the bounds' top, a quiet top doubles (quietRate).
 * - window: a 429 naming a wait of seconds ends a window, not a bucket's token interval: the
 *   window's allowance goes out at once as each window opens, and once its length is known we
 *   wait the window out instead of spending a 429 on finding its end. 429s naming no wait tell a
 *   window by its refusal of seconds after many passed (refusalEnded), polled for at a share of the
 *   refusal so far (pollCapMs); its length is then the least the polled openings allow.
 * The pacer's capacity follows the smallest burst the server has shown it holds (passes
 * right after a pause, beyond what the rate explains, and the evidence's least capacity):
 * after a Retry-After pause the server's refilled bucket is used at once.
 */

import { BucketEvidence } from "./bucket-evidence.js";
import { SecondWindow } from "./second-window.js";

/**
 * A cycle with a pause longer than this is not replayed as a token bucket. A bucket's 429 names
 * the time to its next token, a second in whole seconds at any rate above 1 req/s; a fixed
 * window names its end, seconds to a minute away, and then admits its whole allowance at once.
 */
const REPLAY_MAX_PAUSE_MS = 1_500;
/** A run started from an earlier run's bounds looks this far above that run's 429 for a quota that rose (lookAbove). */
const LOOK_ABOVE = 1.1;
/** ...once the pause it likely costs is at most this share of the work left (lookAboveWorthAPause). */
const LOOK_ABOVE_PAUSE_SHARE = 0.05;
/**
 * Bounds whose top is under this rate (req/s), below any quota we expect (issue 10: 2-200 req/s), are taken for
 * bounds that 429s not about the rate may have set: once quiet for STALE_HOLD_QUIET_MS, the run looks above them
 * (staleHold).
 * A token bucket explains a refusal of the first request after a one-second wait the server named only below
 * 1 req/s; 429 bursts of three that met three such requests put a quota of no limit at [0.5, 1.4] req/s, and
 * the run went on at 1 req/s (80 SKUs with one request in flight: 147 s where it otherwise takes 9). Held with
 * bounds that tight, no 429 ever came to move them.
 */
const STALE_HOLD_MAX_RATE = 1.5;
/** ...quiet this long (ms) under such bounds before the first look; each look doubles it. */
const STALE_HOLD_QUIET_MS = 10_000;
/**
 * Held at bounds of any rate, quiet this long (ms) since the last 429, the run looks above them once (lookAboveHold),
 * as a run started from an earlier run's bounds does (lookAbove): a quota that rose during the run (a plan raised,
 * another client of the workspace gone) is found, where before nothing looked (harness, 40/s burst 10 raised to 80/s
 * burst 20 8 s in, 4,000 requests: 97.4 s without the look, 70.0 s with it; 20/s burst 5 to 60/s burst 20: 146 s,
 * 78 s), and so are bounds a quota's first seconds misled (a counter of 10 per second over 60 s: 1.34x, 1.23x). A
 * quota that did not rise costs the look one pause (40/s burst 10 over 75 s: 1.055x, 1.065x); each look makes the
 * next wait HOLD_LOOK_BACKOFF times as long, and none is made unless its pause is at most HOLD_LOOK_PAUSE_SHARE of
 * the work left (a look is a guess; the bench's runs of 20-35 s never make one). Tried first before the contested
 * replay's floor (RELEARN_REPLAY_MIN_SHARE), it made a shared bucket collapse more often; with it, 40/s burst 4 with
 * another client at 15/s, seeds 1-40: geometric mean 1.842x without the look, 1.796x with it, worst 3.43x, 2.57x.
 */
const HOLD_LOOK_QUIET_MS = 10_000;
const HOLD_LOOK_BACKOFF = 4;
const HOLD_LOOK_PAUSE_SHARE = 0.02;
/**
 * A run's bounds are kept for the next run (lesson) only within this span (high ÷ low): a run that found
 * the quota ends within a few percent (40/s burst 10: [39.2, 41.0]; 100/s of one token spaced from answers:
 * [103, 114]), a slow one within a third (2/s burst 2, 58 requests: [1.7, 2.3], whose next runs then draw no
 * 429 where a run that finds it afresh draws 2 of its 8); a short one still probing leaves [30, 93], and the
 * next runs would hold at 30.
 */
const LEARNED_MAX_SPAN = 1.5;
/** Within this span, send at the lower bound: the rest of the gap is worth less than a 429's pause. */
const TIGHT_SPAN = 1.03;
/** In hold, this far below `low`: the bounds are counts over noisy clocks. */
const HOLD_MARGIN = 0.01;
/**
 * ...unless the bucket has shown at least this many tokens: `low` is proven (counts less their
 * noise), and a few tokens absorb a late timer's catch-up, so the hold goes at `low` itself. Each
 * hold loses the gap to the quota for the rest of the run; the margin cost 0.5-0.8 % on every
 * bucket of 4 tokens or more in the harness sweep (200/20: 1.184 -> 1.176x, 100/25 1.124 ->
 * 1.115x, 429s unchanged). Holding above `low` (1 % over) drew a pause more where the quota sat
 * at `low` (200/20 1.176 -> 1.253x).
 */
const HOLD_AT_LOW_MIN_BURST = 4;
/**
 * The ramp grows its rate at most this often (plus a round trip, so that the last step's 429
 * can come back first), and only after RAMP_STEP_SENDS requests at it (a second at 1 req/s)...
 */
const RAMP_STEP_MS = 250;
const RAMP_STEP_SENDS = 1;
/**
 * ...by this factor. The bracket a 429 leaves (a factor of two) is narrowed by the evidence's
 * replay (bucket-evidence.ts), not by smaller steps: with ×1.5 and two sends a step, a
 * 5 req/s quota without burst took 5 s to reach from 1 req/s, and a 100 req/s one 7 s.
 */
const RAMP_FACTOR = 2;
/**
 * ...but by this factor only, at and above the rate the run's first segment passed at (its passes
 * over its length: a bucket that held much, a large one, stretches it). There a step above the
 * quota draws no 429 until the server's bucket has drained, which a large bucket makes longer than
 * a step, and the ramp doubled on: 100 ms away a 50/s bucket of 50 was sent at 284 req/s when its
 * 429 came, and each request in flight beyond the quota's share was refused (22 of 32).
 */
const RAMP_FACTOR_ABOVE_FIRST = 1.25;
/**
 * ...where the rate keeps at least this many requests in flight (rate × the shortest round trip): each
 * request in flight beyond the quota's share when the bucket runs dry is a 429. On loopback an overshoot
 * costs its pause and a request or two, and the slower steps cost time: 200/s burst 20 went from
 * 1.21x to 1.32x its least time.
 */
const RAMP_CAREFUL_IN_FLIGHT = 2;

/** A rate sent at this long without a 429 is taken as within the quota... */
const QUIET_MS = 2_000;
/** ...if at least this share of its requests really went out (not starved for work). */
const QUIET_SHARE = 0.8;
/** A span counts as sent at its rate (for the upper bound from its passes) when at least this share of the rate went out. */
const STEADY_SHARE = 0.95;
/** A 429 at a rate taken as quiet: that verdict came early (a bucket was still draining); low falls back to this share of it. */
const QUIET_RETRACT = 0.95;
/** Counts are compared over at least this long (shorter spans are dominated by the burst and clock noise). */
const COUNT_MIN_MS = 100;
/**
 * Requests whose place relative to a span's edges is uncertain. Passes are counted by when
 * we sent them, so a span holds exactly what we sent in it; the server saw the same requests
 * a transit time later, the same for both edges but for jitter (a few ms, more on a loaded
 * machine). Counted against every bound: EDGE_NOISE requests plus rate × EDGE_NOISE_MS.
 */
const EDGE_NOISE = 0.5;
const EDGE_NOISE_MS = 10;
/** The evidence's bounds within this span (high ÷ low): probe at their top (see probe()). */
const EVIDENCE_PROBE_SPAN = 1.5;
/**
 * ...when the server's bucket holds at least this many (the first segment's passes less what the
 * rate refilled meanwhile; not the passes alone, which a cold start inflates): a probe above a small bucket draws
 * its 429 at once, with a cycle too short to say much, while quiet verdicts below it converge
 * fast (the capacity over the time).
 */
const EVIDENCE_PROBE_MIN_BURST = 8;
/** The evidence's replay (bucket-evidence.ts) counts the jitter it measures (half the spread of round trips), at least this. */
const EVIDENCE_NOISE_MS = 3;
/**
 * A probe gone quiet replays the evidence with its passes (quietEvidence) at most this often: a replay
 * searches the rate grid through every cycle kept, too much for every tick.
 */
const QUIET_EVIDENCE_EVERY_MS = 500;
/**
 * ...and only while the bounds span more than this (high ÷ low). There the count bound is far below
 * (a slow first segment left the capacity's bound at 55 for a 100/s bucket of 10, and each quiet
 * step took 4-6 s: 1.41-1.45x its least time on the independent server); in a narrow span the replay
 * raised `low` to the quota and the probe above it cost a pause (harness 200/s burst 20: 1.169 -> 1.214x).
 */
const QUIET_EVIDENCE_MIN_SPAN = 1.5;
/** The share of a token a late timer may carry over (pacer.ts), when the server's bucket likely holds several. */
const PACER_CARRY = 0.9;
/** Below this rate a millisecond is under 5% of a token interval: nothing worth the risk of a pair. */
const CARRY_FROM_RATE = 50;
/**
 * ...and only when the run's first segment (from a full bucket, sent at once) passed three or more
 * (burstHigh = passes + 2). A bucket of one token refuses a pair sent closer than one token
 * interval, and each refusal is a whole-second Retry-After: with the carry a 100 req/s quota
 * without burst ran at 3.06× its least time in the harness, without it 1.37×. One token passes
 * one request of the first wave (two at most, when a token refills within its milliseconds).
 * Not the count alone: the CLI's first three requests go one at a time (workspace, locations, the
 * first list page), pass whatever the bucket, and make burstHigh 4. So also only when two of the
 * first passes went out together (firstPassedTogether): a bucket of one token 20 ms away, paced
 * with the carry, ended every pause with a pair 2 ms apart, the second refused (real run, 100 req/s:
 * 3.7x its least time; 2.1-2.9x without the carry).
 */
const CARRY_MIN_BURST_HIGH = 4;
/**
 * A bucket of one token (of the run's first requests, no two passes went out within a millisecond of
 * each other: bucket-evidence.ts, firstPassedTogether): each request waits for the answer to the one
 * before and then a token interval (spacedFromAnswer). The server decided the earlier one before it
 * answered, so the two decisions are at least that far apart whatever the jitter on the way. Paced by
 * send times alone, a 100 req/s bucket of one token refused pairs that a stall of either process
 * (145 ms and 272 ms at most in one run) let out together, and the rate fell to 44 req/s (ratio 2.5).
 * Not from the count of the first passes (one or two): a 200 req/s bucket of two passed two and was
 * paced from answers at 1.60x its least time (harness), 1.17x by the pacer alone.
 */
/**
 * ...while a round trip is at most this share of a token interval: each interval then holds a round
 * trip too (loopback at 100 req/s: 2-3 ms of 10, 80-85 req/s sent where the pacer alone, refused in
 * pairs, held 44). The shortest recent round trip, not the median: a cold process's first answers
 * (20-50 ms) kept the median over the share at 16 req/s, and in two real runs of four the run never
 * came to pace from answers.
 * 1.5 (0.5 until 2026-11-27): beyond half an interval, paced from answers the rate is at most about
 * one over the round trip, but paced by send times a stall on the way that brings two decisions within
 * a token interval refuses the pair (a second's pause each), and a loaded machine has such stalls.
 * 60 req/s without burst 20 ms away, real: by send times 27 req/s held (a 429 at 32 req/s, sent 32 ms
 * after a request whose round trip took 43 ms, set the bounds' top there), 2.3-2.5x its least time;
 * from answers 42-43 req/s, 1.6-1.7x. Harness with 5 % of requests up to 20 ms late: 50/s 20 ms away
 * 2.32 -> 1.35x, 100/s 3.81 -> 2.19x. Without any stall the pacer alone does better (harness 100/s
 * 20 ms away 1.44x against 2.15x; 20/s 100 ms away 1.38x against 2.10x). Chosen by the round trips'
 * spread, the modes switched back and forth (60/s: 39 s, 20 × 429); at 1: 60/s 37.0 s, 100/s 54.6 s;
 * at 1.5: 33.7-34.7 s and 51.5 s.
 */
const SPACED_MAX_LATENCY_SHARE = 1.5;
/**
 * Spaced from answers, each request goes a token interval after the one before, and further by what
 * the last round trip took beyond the shortest (spacedExtraMs) and this margin (the clock's and the
 * timers' noise, scheduler.ts wallClockNow). The server decided the earlier request at most that
 * excess later than its least transit after we sent it, and takes the next no sooner than its least
 * transit after we send it: the two decisions are a token interval apart whatever the jitter, as long
 * as each leg is no shorter than it has been (a stall of either process makes a round trip long, and
 * the next request waits it out). Spaced a whole interval after the answer (a round trip more, and
 * the interval rounded up to whole milliseconds), a 100 req/s bucket of one token went at 77-80 req/s.
 */
const SPACED_MARGIN_MS = 1;
/** ...counting the least round trip once this many are measured (spacedExtraMs); before, the whole round trip. */
const SPACED_MIN_SAMPLES = 4;
/**
 * A 429 naming a wait this long is not a token bucket's: at any rate from 1 req/s its next
 * token is under a second away (Retry-After 1). It is a window's end (a fixed window, or the
 * oldest request of a sliding one leaving it), and the window then admits its whole allowance
 * at once: pacing it out only wastes the window (a 300-per-10-s quota paced at 40 req/s spent
 * 7.4 s of its last window on what goes out in 0.2 s).
 */
const WINDOW_MIN_WAIT_MS = 2_000;
/** ...when the segment it closed passed at least this many: an allowance, not one slow token. */
const WINDOW_MIN_PASSES = 10;
/**
 * A limit inside a window (paceWithinWindow): each 429 of it at the pace in force lowers the pace this
 * much, down to the window's own average. The first pace is the rate the bounds proved before the window showed.
 */
const WINDOW_PACE_RETRACT = 0.9;
/**
 * Paced within a window, a pass that reaches the allowance shows it short (counted over part of a window:
 * inner 429s before the window showed had closed the count): the allowance becomes this many times the
 * window's passes until the window's end names it. Left at the short count, the window's rest went one
 * request at a time, which 50 ms away never reached a 300-per-10-s window's end (harness: 1.70x).
 */
const WINDOW_ALLOWANCE_GROWTH = 2;
/**
 * A window's end whose count (the passes of the segment before its refusal) is under this share of the
 * passes since the last end: the count left out most of the window, and the allowance is not taken as
 * whole (allowanceUnsure). 429s of a limit before the window, each a short named wait, end segments and
 * restart the count: a window of 600 per 30 s behind a 100/s bucket, found after such 429s, was counted
 * at 11 and sent 11-22 a window for the rest of the run (harness, the CLI's slow start, seed 1 of 5: 41.6x
 * its least time; 1.12x with it). Not for every short count: a window of 2,400 per minute without
 * Retry-After, counted at a little under its allowance, went past it, drew 20 429s and found the next
 * opening 5 s late by polling (1.03 -> 1.07x), and 400 per 10 s went over 2 % 429s.
 */
const ALLOWANCE_UNSURE_SHARE = 0.5;
/** ...a 429 is the window's own once the window in course passed this share of its allowance (its end may come early by our count). */
const WINDOW_INSIDE_SHARE = 0.9;
/**
 * 429s naming no wait, refused for a while: each wait of our own is at most this share of the
 * refusal so far (pollCapMs). Doubling, the wait is as long as the refusal, and a window found
 * by it opened up to that long before: a 60 s window whose allowance went in a second was found
 * 30 s after it opened. At this share, a minute's refusal costs about 40 429s.
 */
const POLL_SHARE = 0.2;
/**
 * A window's length from two ends its 429s named as HTTP-dates (windowEnded) is up to a second long: a date names
 * a whole second on the server's clock. A log of the last S seconds sent its allowance just after the whole second
 * its named wait ended on frees its first slot S later, and a date rounded up names the whole second after that:
 * 4 s between ends of a 3-s log, each window waited out at 4 s (harness: 1.33x its least time; a 2-s log 1.50x, a
 * 5-s log 1.20x; 1.11x, 1.13x and 1.10x with the trial). So the length is tried once a second shorter, plus this
 * margin (the pause's own margin and the allowance's spread on the way): refused at the first opening so
 * predicted, the length measured stays for the run, one 429 spent; a window whose ends are exact (a fixed window on
 * whole seconds) costs that 429 only. Not for delta-seconds, counted from the refusal that closes the allowance:
 * their ends were within milliseconds of the log's, and the trial cost a fixed 3-s window 1.03x -> 1.08x.
 */
const WINDOW_LENGTH_TRIAL_MARGIN_MS = 150;
/** ...a second: the grain of an HTTP-date. */
const WINDOW_LENGTH_GRAIN_MS = 1_000;
/**
 * A shorter refusal (from WINDOW_POLLED_MIN_MS) is a window's too when a token bucket would need a
 * capacity of this many seconds of its rate to explain it (passes before × refusal): a window of 200
 * per second refuses for 0.9 s after 200 passed, which a bucket explains only with 180 s of its rate;
 * a bucket of 10/s and 100 refuses 0.1 s (10 s). From 0.5 s: a bucket of 2 req/s and up never refuses so long.
 */
const WINDOW_CAPACITY_S = 20;
const WINDOW_POLLED_MIN_MS = 500;
/** A probe at the first segment's passes per second (perSecondWorthTrying), when they exceed by this much what the bounds' top allows in a second (a bucket whose burst equals its rate passes about that). */
const PER_SECOND_BEYOND = 1.1;
/**
 * Refused seconds that must fit N per second (second-window.ts) before the run holds under N where neither the bucket's
 * bounds failed nor N lies above them (holdPerSecond): two fit a bucket another client shares now and then, and held
 * under N it is never refused (100/s burst 20 with another client at 20/s, 100 ms away: N = 47, 1.31 -> 1.89x).
 */
const PER_SECOND_WITHIN_REFUSED = 3;
/**
 * Held under N per second, quiet this long (ms) since the hold began, the run looks once at PER_SECOND_LOOK × N
 * (keepPerSecondHold), where the pause it would cost is worth it (perSecondLookWorthIt). A counter of N per second
 * refuses the look within a second: the hold comes back and the next look waits longer. A token bucket
 * mistaken for one passes it: N is ruled out and the run ramps from what passed. Nothing else looks above such a
 * hold: a 50/s bucket of 5 tokens with HTTP-date waits, fitted as 19 per second from the ramp's three 429s in its
 * first 3 s, was held at 18 req/s for the rest of the run (the server written apart from ours: 2.83x).
 */
const PER_SECOND_LOOK_QUIET_MS = 5_000;
const PER_SECOND_LOOK = 1.25;
/** ...and each look refused makes the next wait this many times as long: a counter of N per second pays for a look or two in a run of minutes. */
const PER_SECOND_LOOK_BACKOFF = 4;
/**
 * ...where that pause is at most this share of the work left: a counter of N per second refuses every look, and
 * with waits in whole seconds each costs about a second. 100 per second over 60 s (harness): 1.037x without a look,
 * 1.085x with two (5 %, the pause less the burst it refills, as lookAboveWorthAPause counts), 1.054x with one (2 %).
 */
const PER_SECOND_LOOK_PAUSE_SHARE = 0.02;
/**
 * Once the capacity was measured again (relearnCapacity), a replay whose top is under this share of what the run's
 * own cycles proved passed (cycleLow) is not taken (learnFromEvidence): more likely a bucket another client had
 * drained as the measure began than a quota cut by four. Taken, 40/s burst 4 shared with a client at 15/s read as
 * [0.5, 2.4] against 16.8 proven and ran at 2 req/s (8.52x; harness seeds 1-40: geometric mean 1.916 -> 1.842).
 * Quotas cut by 2-7x mid-run (harness `changeTo`, 24 runs) follow as before or within 0-2.2 s of about 50.
 */
const RELEARN_REPLAY_MIN_SHARE = 0.25;
/** Never below: one request every 2 s still makes progress and keeps learning. */
const MIN_RATE = 0.5;
/**
 * A probe above the quota costs one pause: the Retry-After wait less what the server's bucket
 * refills meanwhile (its capacity, at the rate). Holding just below `low` costs the gap to the quota
 * for as long as the run lasts. A probe at the bounds' top goes only while the gap's expected worth
 * over the horizon exceeds the pause's expected cost (probeWorthAPause). The horizon is the work left
 * (the requests the caller still expects, at `low`), or when the caller does not say, the run so far
 * (a run that has gone on for t likely goes on about as long again), at least this long. A 200/s
 * burst-20 quota bracketed at [195, 207] with 10 s of work left spent a 0.9 s pause on a probe worth 0.4 s.
 */
const MIN_HORIZON_MS = 10_000;
/** ...and a pause costs at least this (a 429 without Retry-After: our own backoff, the in-flight requests). */
const MIN_PAUSE_COST_MS = 100;
/**
 * A contested quota: a 429 at a rate already proven within it, a second time in a run (the first
 * relearns the capacity): another client of the workspace spends it too (the application the mirror
 * runs beside), or it moved. Its bounds are no fixed bucket's, and each such 429 used to lower them for
 * good: a 20/s bucket of 2 with another client at 5/s was held at 2-4 req/s of the 15 left, then
 * walked down to 0.6; a 40/4 one with another at 15/s walked down to 1 req/s in a CI run. From then on
 * the rate follows AIMD, as AWS's adaptive retry mode and TCP's congestion avoidance do: each 429 cuts
 * it to this share of the rate that drew it... (harness, seeds 1-5, geometric mean ratio to what the other
 * client leaves, before → after: 20/2 with 5/s 4.70 → 2.83x, 40/4 with 15/s 1.98 → 1.83x, 10/1 with 2/s
 * 16.0 → 9.5x; our 429s 3.4 → 3.3 %, 1.3 → 1.6 %, 18 → 18 %: that other client's bursts empty a bucket so
 * small whatever our rate. A cut to 0.9: 3.12x, 1.82x, 13.5x.)
 */
export const CONTESTED_CUT = 0.95;
/** ...and each CONTESTED_QUIET_MS at it without a 429 raises it: first back to this share of that rate (CUBIC's plateau)... */
const CONTESTED_RETURN = 0.97;
/** ...then by this share, doubling at each rise in a row (up to CONTESTED_MAX_STEP)... */
const CONTESTED_STEP = 0.03;
const CONTESTED_MAX_STEP = 0.24;
/** ...held this long: a 429 from a rise comes within a few seconds (the bucket drains at the rise), the other client's at random (4 s: 3.24x, 1.77x, 11.0x; 2 s: 2.73x, 1.75x, 7.1x but 1.7 % 429s on 40/4). */
export const CONTESTED_QUIET_MS = 3_000;

/**
 * The pacer's carry at `rate`, from CARRY_FROM_RATE up. As it is under the user's own ceiling
 * (`--max-rps`), a mean to keep whatever the server's bucket: without it, timers firing a millisecond
 * late held `--max-rps 200` at 168-172 req/s (a 200/s bucket of 20, real CLI: 24.3 s for a least of
 * 20.2 s, 0 × 429). The adaptive rate adds its conditions on the bucket (RateControl.carryAt).
 */
export function carryAtRate(rate: number): number {
  return rate >= CARRY_FROM_RATE ? PACER_CARRY : 0;
}

export type RatePhase = "unpaced" | "ramp" | "probe" | "hold" | "contested" | "window";

export interface RateSetting {
  rate: number | null;
  /** Pacer capacity: tokens it may hold after a pause. */
  burst: number;
  /** The pacer may carry a fraction of a token above `burst` (the server's bucket holds more than one). */
  carry: number;
  phase: RatePhase;
}

export interface QuotaBounds {
  low: number;
  high: number;
  burstLow: number;
  burstHigh: number;
}

/**
 * What a run proved of the quota, kept for the next run against the same server to start from
 * (RateControl.startFrom): a daemon's incremental cycles are a few dozen requests each, and finding
 * the quota afresh each time cost every cycle its first 429s and their pauses.
 */
export interface LearnedQuota {
  /** Proven within the quota (req/s): the next run holds at it. */
  low: number;
  /** The least rate that drew a 429 since (req/s); null when nothing bounds the quota from above. */
  high: number | null;
  /** The least burst the bucket has shown, and the most its first passes allow (null: not bounded). */
  burstLow: number;
  burstHigh: number | null;
  /** A bucket of one token: each request is spaced from the answer to the one before (spacedFromAnswer). */
  oneToken: boolean;
}

/** What a run leaves the next: a quota to start from, a reason to forget the one kept, or nothing new. */
export type QuotaLesson = { kind: "learned"; quota: LearnedQuota } | { kind: "forget" } | { kind: "nothing" };

/** What the rate control reads of the round trips (concurrency.ts measures them). */
export interface RoundTrips {
  /** The median round trip (ms). */
  readonly latencyMs: number;
  /** Longest less shortest recent round trip (ms): the jitter of a busy machine included. */
  readonly spreadMs: number;
  /** The shortest recent round trip (ms): the distance to the server, without a cold process's first answers or a queue. */
  readonly shortestMs: number;
  /** Round trips measured so far (absent: enough). */
  readonly samples?: number;
  /** The most requests ever in flight at once (the configured ceiling); absent: no such bound. */
  readonly ceiling?: number;
}

const NO_ROUND_TRIPS: RoundTrips = { latencyMs: 0, spreadMs: 0, shortestMs: 0 };

export class RateControl {
  private setting: RateSetting = { rate: null, burst: 1, carry: 0, phase: "unpaced" };
  private low = 0;
  private high = Infinity;
  private burstLow = 1;
  private burstHigh = Infinity;
  private firstSentAt: number | null = null;
  /** The run's first segment's passes over its length (req/s), once a 429 closed it (rampStep). */
  private firstSegmentRate = Infinity;
  /** The last pause every worker took for a 429 (ms). */
  private lastPauseMs = 1_000;
  /** Requests the caller still expects to send (expectRemaining), null when it has not said. */
  private remaining: number | null = null;
  /** Passes answered since the run began, and since the current segment (the last pause's end). */
  private passes = 0;
  private segment: { startAt: number; passes: number; fromFull: boolean } | null = null;
  /**
   * Passes of the segments before the current one since the last 429 episode (or the window we entered
   * on our own): a pause no 429 asked for (a 503's Retry-After) ends a segment, not a window. Counted from
   * the segment alone, a window of 300 per 10 s whose first seconds held three such pauses took its
   * allowance for the 42 sent after the last of them, and sent 42 a window (harness: 5.5x its least time).
   */
  private windowCarry = 0;
  /** The segment in course ended with a 429 episode, or a window's end we paused for: the next starts the count afresh. */
  private windowCounted = false;
  /**
   * The next segment starts from a bucket taken as full: the run's first, or the first after a pause
   * when the run's first request was already refused (a bucket another client, or the run before,
   * had emptied: no bucket that started full refuses its first request).
   */
  private nextFromFull = true;
  /** The least rate the cycles alone show (learnFromCycle): sound whatever the capacity, unlike the count bounds that use burstHigh. */
  private cycleLow = 0;
  /** The capacity was measured afresh once (relearnCapacity); `relearning` while its unpaced segment is out. */
  private relearned = false;
  /** The quota is contested (CONTESTED_CUT): the rate that drew its last 429, the last 429 or rise (ms, sends), the rises since. */
  private contested: { drew: number; at: number; sends: number; rises: number } | null = null;
  private relearning = false;
  /** Passes sent since the current 429 episode's first 429 was sent. */
  private cycle: { startAt: number; passes: number } | null = null;
  private sends = 0;
  private rateSetAt = 0;
  private sendsAtSet = 0;
  private grownAt = 0;
  private sendsAtStep = 0;
  /** `low` when the probe rate in force was chosen. */
  private lowAtSet = 0;
  /** Passes of requests sent at the rate in force (since its first request). */
  private passesAtRate = 0;
  private spentAtRate = 0;
  /** What the requests showed about the quota as a token bucket (bucket-evidence.ts). */
  private evidence = new BucketEvidence();
  /** The same requests read as N per second (second-window.ts), and the N it fits once it does: held just under it. */
  private second = new SecondWindow();
  private perSecondAllowance: number | null = null;
  private perSecondBounds = { low: 0, high: Infinity };
  /** When the hold under N per second began (or its last look was refused), how long it waits quiet before a look, and whether one is out. */
  private perSecondHeldAt = 0;
  private perSecondLookQuietMs = PER_SECOND_LOOK_QUIET_MS;
  private perSecondLooking = false;
  /** False once a 429 came at a rate the evidence put within the quota. */
  private evidenceTrusted = true;
  /** The last 429's evidence found rates that fit (bucket-evidence.ts): the bounds are the evidence's. */
  private evidenceFits = false;
  /** A pass since the last 429 was decided late (passed): the server may have stalled in the cycle in course. */
  private stallInCycle = false;
  /** When a quiet probe last replayed the evidence (quietEvidence). */
  private quietEvidenceAt = 0;
  /** The span (high ÷ low) when the last probe at the evidence's top was set. */
  private evidenceSpan = Infinity;
  /** The rate in force is a probe at the evidence's top. */
  private evidenceProbe = false;
  /** Requests granted since the last pause ended, and the window's allowance (phase "window"). */
  private grantsInSegment = 0;
  private allowance = Infinity;
  /** The last window end a 429 named, windows we paused out on our own since, and the window's length once two ends are known. */
  private windowEnd: number | null = null;
  /**
   * Windows found by polling (429s naming no wait): each opened between our last refused request and the
   * one that passed ([earliest, latest]), and its count from the first found (windowEnded).
   */
  private polledEnds: Array<{ index: number; earliest: number; latest: number }> = [];
  private windowsSince = 0;
  private windowMs: number | null = null;
  /** The window's length tried a grain shorter than its ends measured (WINDOW_LENGTH_TRIAL_MARGIN_MS): not yet, in course, or refused. */
  private lengthTrial: "untried" | "trying" | "refused" = "untried";
  /** The last 429 named its wait as an HTTP-date (whole seconds on the server's clock), not as delta-seconds counted from its answer. */
  private endNamedAsDate = false;
  /** When the window in course opened by our prediction (enterNextWindow), until a request sent from then passes; null when confirmed. */
  private predictedOpenAt: number | null = null;
  /**
   * A rate limit inside the window's allowance (paceWithinWindow): each window's allowance goes out at
   * this rate; null: at once.
   */
  private windowPace: number | null = null;
  /** The pause in course is an inner limit's: the window's grants go on counting across it. */
  private keepGrants = false;
  /** The allowance is a guess grown from a short count (WINDOW_ALLOWANCE_GROWTH): the next window's end names it. */
  private allowanceGuessed = false;
  /**
   * The allowance was counted over a whole window (one that opened in phase "window"), not only over the
   * part after the last pause when the window first showed: the count before may be short (inner 429s
   * closed it), and paced within a window such a count is checked by requests, not waited out (enterNextWindow).
   */
  private allowanceWhole = false;
  /**
   * The allowance was counted over a part of its window only (ALLOWANCE_UNSURE_SHARE): each window then goes
   * on one request at a time past it until one passes (it grows, WINDOW_ALLOWANCE_GROWTH) or the window
   * refuses (it is whole), as a window paced within does.
   */
  private allowanceUnsure = false;
  /** `passes` at the last window end: what the window's count may have left out. */
  private passesAtWindowEnd = 0;
  /** The first probe after the ramp goes no lower than this (probe()); 0 once used. */
  private rampFloor = 0;
  /** When the last 429 came (throttled), and how long bounds under STALE_HOLD_MAX_RATE wait quiet before the run looks above them (staleHold). */
  private lastThrottledAt = -Infinity;
  private staleHoldQuietMs = STALE_HOLD_QUIET_MS;
  /** How long a hold at bounds of any rate waits quiet before it looks above them (lookAboveHold), and the bounds and rate it looked from while it looks. */
  private holdLookQuietMs = HOLD_LOOK_QUIET_MS;
  private holdLook: { low: number; high: number; rate: number; phase: RatePhase } | null = null;
  /** The rates requests went out at since the current segment began: [first send at it, rate], oldest first. */
  private sentRates: Array<[number, number | null]> = [];
  /**
   * The fastest probe rate sent at for QUIET_MS without a 429 since the last, where counts cannot tell
   * (the bucket may hold more than the rate sends in QUIET_MS) and that 429 named no wait (`unnamed`):
   * a probe above the quota then costs a short backoff of our own, not a second's pause. The next probe
   * goes from it, at the bounds' top, and a quiet top doubles (not a bound: `low` stays what counts
   * prove). A window of 200 per 2 s without Retry-After, read as a token bucket of 200 at 1-4 req/s,
   * took minutes to climb back by counts (51x its least time, harness); this way 2.2x, 1.6x for real.
   */
  private quietRate = 0;
  private unnamed = false;
  /**
   * 429s naming no wait: when the run of them with no pass between began (the first one's send),
   * and what the segment before it passed. A refusal of seconds after a segment that passed many,
   * ended by a pass, is a window that opened again (refusalEnded).
   */
  private refusedSince: number | null = null;
  /**
   * When the refusal's first 429 was read. Only a request sent from then on ends the refusal by its pass:
   * one already on its way may pass out of order (sent 0.1 ms after the first refused, it arrived first),
   * as the scheduler's 429 episodes count it too, and it counts with the passes before the refusal. Taken
   * as the end, that pass left the refusal that followed with a segment of no passes, never a window's: a
   * window of 2,400 per minute without Retry-After, timers a millisecond late, was held at 0.5 req/s and
   * not done in an hour of virtual time (harness, 2 seeds of 3). Left out of the allowance, the window after
   * kept a request for our opening's probe, whose pass took an early opening for the real one (1.30x).
   */
  private refusalReadAt = -Infinity;
  private passedBeforeRefusal = 0;
  /** The refusal came right after the run's first passes, many of them from a full bucket: a window's allowance, perhaps. */
  private refusedFromFull = false;
  /** The last request a 429 naming no wait refused (its send). */
  private lastRefusedAt = -Infinity;
  /** The wait the last 429 named (ms), null when none. */
  private lastNamedMs: number | null = null;
  /** A probe at the first segment's passes per second went out (perSecondWorthTrying). */
  private perSecondTried = false;
  /**
   * ...at this rate, while no 429 has come since (then null): quiet, it is followed once by a probe at all
   * the first segment's passes per second (perSecondAllWorthTrying).
   */
  private perSecondQuietRate: number | null = null;
  /** A 429 episode began since the rate in force was set (it is not quiet, whatever its length). */
  private throttledAtRate = false;
  /** A request backed off alone since the rate in force was set: sending stalled, and the server's bucket may have filled. */
  private stalledAtRate = false;
  /**
   * The run started from an earlier run's bounds (startFrom) and no 429 has come since: it probes above
   * them only once the caller has said how much work is left, and that work is worth a pause.
   */
  private started = false;
  /**
   * The earlier run found a bucket of one token (startFrom). This run's first segment, paced from its
   * first request, sends no two together and so cannot tell (firstPassedTogether): the earlier verdict
   * stands until a segment measures the capacity again unpaced (startedEmpty).
   */
  private startedOneToken = false;
  private firstSegmentPaced = false;
  /** The least rate that drew a 429 in the earlier run (startFrom), or twice its `low` when none did. */
  private priorHigh = Infinity;
  /** The rate this run started from (startFrom) drew a 429: what the earlier run learned no longer holds. */
  private startRefuted = false;
  /** A 429 at the rate started from was excused once (startExcused). */
  private startExcuseUsed = false;

  /** `roundTrips`: the ramp waits a round trip per step, and the evidence counts their jitter as noise. */
  constructor(private readonly roundTrips: RoundTrips = NO_ROUND_TRIPS) {}

  get current(): RateSetting {
    return this.setting;
  }
  get bounds(): QuotaBounds {
    return { low: this.low, high: this.high, burstLow: this.burstLow, burstHigh: this.burstHigh };
  }

  /**
   * Start from what an earlier run against this server proved: held at its `low`, from the first
   * request, without the unpaced first segment and the ramp. A 429 at that rate (the quota shrank, or
   * another client spends it now) is a 429 at a rate taken as within the quota: the capacity and the
   * rate are measured again from an unpaced segment (relearnCapacity), as in a run that started afresh,
   * and the lesson is to forget it, but for a first one that says nothing against it (startExcused).
   */
  startFrom(prior: LearnedQuota, now: number): void {
    this.low = Math.max(MIN_RATE, prior.low);
    // Not a bound of this run's: the quota may have risen since (lookAbove).
    this.high = Infinity;
    this.priorHigh = prior.high !== null && prior.high > this.low ? prior.high : this.low * RAMP_FACTOR;
    this.burstLow = Math.max(1, Math.floor(prior.burstLow));
    this.burstHigh = prior.burstHigh !== null ? Math.max(this.burstLow, prior.burstHigh) : Infinity;
    this.startedOneToken = prior.oneToken;
    this.firstSegmentPaced = true;
    this.started = true;
    this.setRate(this.holdRate(this.low), "hold", now);
  }

  /**
   * What this run proved of the quota, for the next run against the server: its bounds when they are within
   * LEARNED_MAX_SPAN (a run that found the quota); "forget" when the quota is a window (no steady rate to
   * pace at) or the rate this run started from drew a 429 (it no longer holds); otherwise nothing (a short
   * run still probing: what an earlier run kept stands). Kept from a short run, bounds of [30, 93] held a
   * 100 req/s bucket of one token at 30 for every incremental run after (4x its least time).
   */
  lesson(): QuotaLesson {
    if (this.setting.phase === "window" || this.startRefuted) return { kind: "forget" };
    // Held under N per second, not yet refused there: the bucket's bounds of before are taught, not N. A bucket
    // whose burst equals its rate fits N for a while, and a run that ended in that hold taught 58.2 for 50 req/s.
    const { low, high } = this.perSecondAllowance !== null ? this.perSecondBounds : { low: this.low, high: this.high };
    const tight = low >= MIN_RATE && high / low <= LEARNED_MAX_SPAN;
    if (!tight || this.setting.phase === "unpaced") return { kind: "nothing" };
    const quota = {
      // Spaced from answers, `low` counts what passed at the rate set, beyond what went out (sendable): a
      // token interval of it is no longer a bound, and a later run that starts spaced at it before it has
      // measured a round trip drew its 429 at once (100 req/s without burst, low 103.4). What went out passed.
      low: this.oneToken ? this.sendable(low) : low,
      high,
      burstLow: this.burstLow,
      burstHigh: Number.isFinite(this.burstHigh) ? this.burstHigh : null,
      oneToken: this.oneToken,
    };
    return { kind: "learned", quota };
  }

  /** A bucket of one token: the run's first segment passed no two requests together, or the earlier run's found so (firstSegmentPaced). */
  private get oneToken(): boolean {
    return this.firstSegmentPaced ? this.startedOneToken : this.evidence.firstPassedTogether() === 1;
  }

  /**
   * In phase "window" with the allowance granted and the window's length known: move on to the
   * next window and say when it opens (epoch ms); its allowance starts afresh. Null: the length is
   * not known yet, and one request at a time finds the window's end.
   */
  enterNextWindow(): number | null {
    // Refused after the opening we predicted (429s naming no wait): this window, not the next, is polled for.
    if (!this.windowSpent || this.windowEnd === null || this.windowMs === null || this.predictedOpenAt !== null) return null;
    // Paced within the window on a count that may be short: requests go on (one at a time until one passes, which grows it).
    if ((this.windowPace !== null || this.allowanceUnsure) && !this.allowanceWhole) return null;
    this.windowsSince++;
    this.grantsInSegment = 0;
    this.windowCounted = true;
    this.predictedOpenAt = this.windowEnd + this.windowsSince * this.windowMs;
    return this.predictedOpenAt;
  }

  /**
   * In phase "window": the window in course opened at a moment we predicted from its length, not one a
   * 429 named, and no request sent in it has passed yet. Whole-second Retry-After puts each end we learn
   * up to a second late, so a length from two ends can be short by a second; a window taken as open a
   * little early drew a 429 from every request in flight (4 of a 100-per-3-s window's allowance) where
   * one request going first draws one.
   */
  get windowOpening(): boolean {
    return this.setting.phase === "window" && this.predictedOpenAt !== null;
  }

  /**
   * In phase "window": this window's allowance is granted, or its 429s name no wait and we poll
   * for the next; one request at a time finds the window's end.
   */
  get windowSpent(): boolean {
    return this.setting.phase === "window" && (this.grantsInSegment >= this.allowance || (this.unnamed && this.refusedSince !== null));
  }

  /**
   * The longest wait of our own after a 429 naming none: POLL_SHARE of the refusal so far, where it may
   * be a window's (phase "window", refused WINDOW_MIN_WAIT_MS, or right after the run's first segment
   * passed many: a window of a second polled by the doubling backoff of the probe rate its refusal left,
   * 0.8 s and more, never showed a refusal long enough to tell, and ran as a bucket: harness 200 per 1 s
   * 1.88x, 1.05x polled at a share); Infinity otherwise (a bucket's short refusals back off doubling: at a
   * share throughout, a 10/s bucket of 100 drew twice the 429s).
   */
  pollCapMs(now: number): number {
    if (this.refusedSince === null) return Infinity;
    const refusedMs = Math.max(0, now - this.refusedSince);
    return this.setting.phase === "window" || this.refusedFromFull || refusedMs >= WINDOW_MIN_WAIT_MS ? POLL_SHARE * refusedMs : Infinity;
  }

  /** The caller expects about `requests` more (null: unknown). Only the worth of a probe reads it (probeWorthAPause). */
  expectRemaining(requests: number | null): void {
    this.remaining = requests;
  }

  /**
   * The server's bucket holds one token: one request in flight, each sent a token interval after the
   * last answer (SPACED_MAX_LATENCY_SHARE and the comment above it).
   */
  get spacedFromAnswer(): boolean {
    const rate = this.setting.rate;
    if (rate === null || this.setting.phase === "window") return false;
    const share = (this.roundTrips.shortestMs * rate) / 1000;
    if (share > SPACED_MAX_LATENCY_SHARE) return false;
    return this.oneToken;
  }

  /** Spaced from answers: how much later than a token interval after the last send the next goes, when the last round trip took `roundTripMs`. */
  spacedExtraMs(roundTripMs: number): number {
    // The least transit is known after a few round trips only: a run's first request opens the connection, and
    // that round trip taken for the least, the next went a token interval after the first's send, not after the
    // server decided it (a run started spaced from an earlier run's quota drew its 429 at the second request).
    const least = (this.roundTrips.samples ?? SPACED_MIN_SAMPLES) >= SPACED_MIN_SAMPLES ? this.roundTrips.shortestMs : 0;
    return Math.max(0, roundTripMs - least) + SPACED_MARGIN_MS;
  }

  /** What sending at `rate` really sends (req/s): spaced from answers, each interval is longer (spacedExtraMs at the median round trip). */
  private sendable(rate: number): number {
    return this.spacedFromAnswer ? 1 / (1 / rate + this.spacedExtraMs(this.roundTrips.latencyMs) / 1000) : rate;
  }

  /** A request went out (granted) at `now`; `afterPause`: the first since a pause ended. */
  sent(now: number, afterPause: boolean): void {
    if ((afterPause && !this.keepGrants) || !this.segment) this.grantsInSegment = 0;
    if (afterPause) this.keepGrants = false;
    this.grantsInSegment++;
    this.firstSentAt ??= now;
    // The quiet clock starts with the first request at a rate, not at the pause that usually follows setting it.
    if (Number.isNaN(this.rateSetAt)) this.rateSetAt = now;
    if (afterPause || !this.segment) {
      this.windowCarry = this.windowCounted ? 0 : this.windowCarry + (this.segment?.passes ?? 0);
      this.windowCounted = false;
      this.segment = { startAt: now, passes: 0, fromFull: this.nextFromFull };
      this.nextFromFull = false;
      this.sentRates = [];
    }
    if (this.sentRates.at(-1)?.[1] !== this.setting.rate) this.sentRates.push([now, this.setting.rate]);
    this.sends++;
    this.evidence.sent(now);
  }

  /**
   * Every worker pauses `ms`. A long pause (a fixed window's end, a quota wall) says the server
   * is not a token bucket refilling steadily: the cycle it is in is not replayed.
   */
  pausing(ms: number): void {
    this.lastPauseMs = ms;
    if (ms > REPLAY_MAX_PAUSE_MS) this.evidence.invalidate();
  }

  /**
   * Requests that may go at once when a pause of `pauseMs` that no 429 asked for (a 503's Retry-After)
   * ends: what the server's bucket surely refilled meanwhile, its least rate over the pause, up to the
   * burst it has shown less one (the pacer's own capacity when not in an evidence probe). 0 when nothing
   * is proven (the pacer alone decides).
   */
  refilledDuring(pauseMs: number): number {
    return Math.max(0, Math.min(this.burstLow - 1, Math.floor((this.low * pauseMs) / 1000)));
  }

  /** A request counted by sent() was not written after all (scheduler.ts mayWrite). */
  unsent(): void {
    this.sends = Math.max(0, this.sends - 1);
    this.grantsInSegment = Math.max(0, this.grantsInSegment - 1);
  }

  /** The request sent at `sentAt` was answered (whatever the answer). */
  settled(sentAt: number): void {
    this.evidence.settled(sentAt);
  }

  /**
   * A request sent at `sentAt` passed the quota. Counted in the segment (and cycle) it was sent in.
   * `decidedLate`: answered so late that the server may have held it in a stall and decided it with
   * others at once (scheduler.ts decidedLate); its cycle then refutes nothing (learnFromEvidence).
   */
  passed(sentAt: number, decidedLate = false): void {
    this.passes++;
    if (decidedLate) this.stallInCycle = true;
    if (this.refusedSince !== null && sentAt >= this.refusalReadAt) this.refusalEnded(sentAt);
    else if (this.refusedSince !== null) this.passedBeforeRefusal++;
    if (this.predictedOpenAt !== null && sentAt >= this.predictedOpenAt) this.predictedOpenAt = null;
    if (sentAt >= this.rateSetAt) this.passesAtRate++;
    if (this.segment && sentAt >= this.segment.startAt) this.segment.passes++;
    if (this.cycle && sentAt >= this.cycle.startAt) this.cycle.passes++;
    if (this.setting.phase === "window" && (this.windowPace !== null || this.allowanceUnsure)) this.growShortAllowance();
    this.evidence.passed(sentAt);
    this.second.passed(sentAt);
  }

  /** A request sent at `sentAt` may have spent a token without passing (a 503): only upper bounds count it. */
  spent(sentAt: number): void {
    if (sentAt >= this.rateSetAt) this.spentAtRate++;
    this.evidence.spent(sentAt);
  }

  /** A request is backing off alone (a 503 without Retry-After, a network error): the span at the rate in force was not steady. */
  stalled(): void {
    this.stalledAtRate = true;
  }

  /**
   * From one 429 episode to the next the bucket went from empty to empty: what passed in
   * between is what it refilled, pauses included, so no more than the rate allows
   * (less when it overflowed during a pause). For a fixed window this is its allowance per window.
   */
  private learnFromCycle(sentAt: number): void {
    const c = this.cycle;
    this.cycle = { startAt: sentAt, passes: 0 };
    if (!c) return;
    const elapsed = sentAt - c.startAt;
    if (elapsed < COUNT_MIN_MS) return;
    const noise = EDGE_NOISE + ((this.setting.rate ?? 0) * EDGE_NOISE_MS) / 1000;
    const low = (c.passes - 1 - noise) / (elapsed / 1000);
    if (low > this.cycleLow) this.cycleLow = low;
    if (low > this.low) this.low = low;
  }

  /**
   * A new 429 episode began: its first 429 was sent at `sentAt`. `accepted`: the rate the
   * server accepted over the last second (req/s).
   */
  throttled(sentAt: number, now: number, accepted: number, waitMs: number | null = null, namedAsDate = false): void {
    this.noteRefusal(sentAt, waitMs, namedAsDate);
    const stalled = this.takeStallInCycle();
    const seg = this.segment;
    // What the window in course admitted, 503 pauses and all (windowCarry).
    const windowPasses = this.windowCarry + (seg?.passes ?? 0);
    if (this.insideWindow(waitMs, windowPasses, now)) return this.paceWithinWindow();
    this.windowCounted = true;
    const started = this.started;
    this.started = false;
    this.unnamed = waitMs === null;
    this.lastNamedMs = waitMs;
    this.markThrottled(now);
    if (!this.unnamed) this.quietRate = 0;
    if (!this.unnamed) this.refusedSince = null;
    else {
      this.lastRefusedAt = Math.max(this.lastRefusedAt, sentAt);
      if (this.refusedSince === null) {
        this.refusedSince = sentAt;
        this.refusalReadAt = now;
        this.passedBeforeRefusal = windowPasses;
        // The run's first passes only (a segment that measures the capacity again later is a bucket's, known by then).
        this.refusedFromFull = (seg?.fromFull ?? false) && this.passes === this.passedBeforeRefusal && this.passedBeforeRefusal >= WINDOW_MIN_PASSES;
      }
    }
    // A window whose 429s name no wait: our own backoff polls for its opening (refusalEnded), no rate to learn.
    if (this.unnamed && this.setting.phase === "window") return this.evidence.invalidate();
    // Once a window, always a window: a 429 naming its end when that end is near (a window opened a
    // little later than we counted, the end then under 2 s away) is no bucket's token interval. Taken
    // for one, the run fell back to a ramp from 0.5 req/s in its last window (300 per 10 s: 1.19).
    const inWindow = this.setting.phase === "window" && waitMs !== null && waitMs > 0;
    if (seg && waitMs !== null && (inWindow || (waitMs >= WINDOW_MIN_WAIT_MS && windowPasses >= WINDOW_MIN_PASSES))) return this.windowEnded(windowPasses, now + waitMs);
    this.learnFromCycle(sentAt);
    this.learnFromCounts(sentAt);
    this.learnBurst(sentAt);
    // Not from a segment that passed nothing (a bucket emptied before the run, 503s only): a rate of 0 would slow every step.
    if (seg?.fromFull && seg.passes > 0 && sentAt - seg.startAt >= COUNT_MIN_MS) this.firstSegmentRate = seg.passes / ((sentAt - seg.startAt) / 1000);
    const rate = this.setting.rate;
    const phase = this.setting.phase;
    this.evidence.closeAt(sentAt);
    if (phase === "unpaced" && this.passes === 0) return this.startedEmpty();
    if (phase === "unpaced" && this.relearning) {
      // The capacity measured again: probe within the bounds kept (the fresh evidence has no cycle yet).
      this.relearning = false;
      return this.probe(now);
    }
    if (phase === "unpaced" || rate === null) {
      this.setRate(Math.max(MIN_RATE, accepted), "ramp", now);
      return;
    }
    const drewIt = this.rateThatDrew(sentAt, rate);
    if (this.holdLook) return this.holdLookRefused(now);
    // The bucket's bounds refuted (a 429 at what they took as within the quota), or N per second above them: try N per second.
    if (this.holdPerSecond(drewIt <= this.low * (1 + HOLD_MARGIN), now)) return;
    if (started && drewIt <= this.low * (1 + HOLD_MARGIN) && this.startExcused()) return;
    // A 429 at a rate taken as quiet: that verdict came early (a bucket still draining).
    if (drewIt <= this.quietRate * (1 + HOLD_MARGIN)) this.quietRate = 0;
    // Only a bucket's 429s naming a wait (a window's, or those naming none, have their own ways: windowEnded, quietRate).
    const contested = this.contested !== null || (drewIt <= this.low * (1 + HOLD_MARGIN) && this.relearned);
    if (contested && !this.unnamed && (phase === "probe" || phase === "hold" || phase === "contested")) return this.contestedThrottle(drewIt, now);
    if (drewIt <= this.low * (1 + HOLD_MARGIN)) {
      if (started) this.startRefuted = true;
      if (!this.relearned && this.evidenceFits && !this.evidence.capacityRefuted) this.refuteFirstCapacity();
      else {
        if (!this.relearned) return this.relearnCapacity(drewIt);
        // At or below what we took as within the quota: that verdict was early, or the quota shrank.
        this.low = Math.max(MIN_RATE, drewIt * QUIET_RETRACT);
        // When the evidence said so, its noise was beyond ours (a busy machine's stalls): it says nothing more this run.
        if (this.evidenceFits) this.evidenceTrusted = false;
      }
    }
    // Started from an earlier run's bounds, the look above them drew this: the quota has not risen, and that run's bound holds again.
    if (started) this.high = Math.min(this.high, this.priorHigh);
    this.high = Math.min(this.high, drewIt, this.rateCountHigh(sentAt));
    if (phase === "ramp") this.rampFloor = drewIt / RAMP_FACTOR;
    this.learnFromEvidence(drewIt, stalled);
    if (this.holdPerSecond(false, now)) return;
    this.probe(now);
  }

  /** A 429 sent at `sentAt` naming `waitMs` (as an HTTP-date when `namedAsDate`): what the per-second test and a window's length read of it. */
  private noteRefusal(sentAt: number, waitMs: number | null, namedAsDate: boolean): void {
    // Any 429 ends the quiet of a per-second probe (perSecondAllWorthTrying).
    this.perSecondQuietRate = null;
    this.second.refused(sentAt, waitMs);
    this.endNamedAsDate = namedAsDate;
  }

  /** Whether a pass since the last 429 was answered late (stallInCycle), and a fresh cycle from here. */
  private takeStallInCycle(): boolean {
    const stalled = this.stallInCycle;
    this.stallInCycle = false;
    return stalled;
  }

  /**
   * The run's first request was refused: the bucket was empty when we started (another client of
   * the workspace, or the run before, had just used it), and what passed says nothing of its
   * capacity. Taken as the bound it would be, a drained 40/s burst-10 bucket read as a bucket of one
   * token and the run drew 30 429s at 1.8x its least time. Stay unpaced: the segment after this pause
   * starts from what the pause refilled, and counts as the run's first.
   */
  private startedEmpty(): void {
    this.firstSegmentPaced = false;
    this.nextFromFull = true;
    this.burstHigh = Infinity;
    this.cycle = null;
    this.evidence = new BucketEvidence();
  }

  /**
   * A 429 at a rate the replay had taken as within the quota, while it still took the run's first
   * segment for a full bucket: that is the likeliest wrong belief (a bucket partly used before the run,
   * whose short cycles a faster rate and a smaller capacity explain as well). Drop it (as bucket-evidence.ts
   * does when the replay fits nothing: firstCapRefuted) and probe within what the replay without it fits,
   * this 429's cycle included, instead of measuring the capacity again. 100/s burst 20 found with 5
   * tokens: the replay kept 115.9-119.3 until the hold at 115.9 drew its 429; measured again, the run
   * climbed back by quiet verdicts (1.23x); refuted, it probed at 100.2 within [96.8, 103.5] (1.16x).
   */
  private refuteFirstCapacity(): void {
    this.evidence.refuteCapacity();
    this.forgetFirstCapacity();
    this.quietRate = 0;
    // Out of hold: a hold moves only up with `low` (probe()), and this one is above the quota.
    this.setting = { ...this.setting, phase: "probe" };
  }

  /**
   * The first segment's capacity refuted (bucket-evidence.ts, firstCapRefuted): the lows it gave fall
   * back to what the cycles alone show, and its passes no longer bound the burst (the count bounds,
   * heldAt, took the bucket for no fuller than they were).
   */
  private forgetFirstCapacity(): void {
    this.burstHigh = Infinity;
    this.low = Math.max(MIN_RATE, this.cycleLow);
  }

  /**
   * A 429 at a rate we had taken as within the quota: the first time, the likeliest wrong belief is
   * the capacity the run's first segment showed (a bucket another client had partly used: 1.5 tokens
   * left of a 40/s burst-10 bucket read as a bucket of 3, every lower bound from counts came out too
   * high, and the run drew 27 429s at 1.66x its least time). Measure it again: the segment after this
   * pause goes out unpaced from what the pause refilled, and the rate's bounds keep only what holds
   * whatever the capacity (the cycles' counts, and the rates that drew a 429). Once a run: a second
   * such 429 is noise beyond ours (a busy machine's stalls), handled in throttled().
   */
  private relearnCapacity(rate: number): void {
    this.relearned = true;
    this.relearning = true;
    this.startedEmpty();
    this.quietRate = 0;
    this.burstLow = 1;
    this.low = this.cycleLow;
    this.high = Math.min(this.high, rate);
    this.evidenceFits = false;
    this.evidenceProbe = false;
    this.evidenceSpan = Infinity;
    this.setting = { rate: null, burst: 1, carry: 0, phase: "unpaced" };
  }

  /**
   * A request sent at `sentAt` passed after 429s naming no wait since `refusedSince`. Refused (first to
   * last refused request) for WINDOW_MIN_WAIT_MS or more after a segment that passed WINDOW_MIN_PASSES or more, the quota is a
   * window that opened again: no token bucket of a rate worth the name (2 req/s and up) refuses that
   * long, and one that refills at the rate such a refusal implies (a window of 2,400 per minute
   * replayed as a bucket: 0.6 req/s) held a sync there for the rest of its run (harness: not done in
   * an hour of virtual time). It opened after the last refused request went and no later than `sentAt`:
   * the window's length is taken at the least those bounds allow, so that the openings we predict
   * come early, if at all (a refusal, polled finely: pollCapMs), never late (the window's time lost).
   * In phase "window", a refusal after the opening we predicted puts the anchor at the real one.
   */
  private refusalEnded(sentAt: number): void {
    const since = this.refusedSince!;
    this.refusedSince = null;
    if (!this.unnamed) return;
    const predictedEarly = this.setting.phase === "window" && this.predictedOpenAt !== null;
    // The refusal the server showed: from the first refused request to the last (our own wait after it is not the server's).
    const refusedMs = Math.max(since, this.lastRefusedAt) - since;
    const passes = this.passedBeforeRefusal;
    const window = passes >= WINDOW_MIN_PASSES && (refusedMs >= WINDOW_MIN_WAIT_MS || (refusedMs >= WINDOW_POLLED_MIN_MS && (passes * refusedMs) / 1000 >= WINDOW_CAPACITY_S));
    if (!predictedEarly && !window) return;
    this.windowEnded(passes, Math.max(since, this.lastRefusedAt), sentAt, since);
    // The request that found the opening is this window's first grant.
    this.grantsInSegment = 1;
  }

  /**
   * A window's end (WINDOW_MIN_WAIT_MS): what it admitted is its allowance, sent at once as the
   * next opens (unpaced). Two ends a window apart give its length, and from then on we wait out
   * each window on our own instead of spending a 429 to find its end.
   */
  private windowEnded(passes: number, end: number, latest: number | null = null, refusedFrom = end): void {
    // A window: the contested bucket's AIMD was its refusals misread.
    this.contested = null;
    // Most of the passes since the last end (or the run's start) left out of the count (ALLOWANCE_UNSURE_SHARE).
    this.allowanceUnsure = this.passes - this.passesAtWindowEnd > passes / ALLOWANCE_UNSURE_SHARE;
    this.passesAtWindowEnd = this.passes;
    this.allowance = Number.isFinite(this.allowance) && !this.allowanceGuessed ? Math.max(this.allowance, passes) : passes;
    this.allowanceGuessed = false;
    if (this.setting.phase === "window") this.allowanceWhole = true;
    // How many windows lie between this end and the last: the ones we paused out on our own, and the one
    // whose allowance this 429 closed. Unless no request passed since we took the window in course as
    // open: then we took it early, and the 429 names the end of the window before (the length we knew was short).
    const windows = this.predictedOpenAt !== null ? this.windowsSince : this.windowsSince + 1;
    if (latest !== null) this.windowMs = this.polledLength(windows, end, latest, refusedFrom);
    else if (this.windowEnd !== null && windows >= 1) {
      const gap = end - this.windowEnd;
      this.windowMs = gap / windows >= WINDOW_MIN_WAIT_MS ? this.tryShorterLength(gap / windows, windows) : null;
    }
    this.windowEnd = end;
    this.windowsSince = 0;
    this.predictedOpenAt = null;
    this.grantsInSegment = 0;
    this.setting = this.windowSetting();
    this.evidence.invalidate();
  }

  /**
   * The length two named ends measured (`measured`, over `windows` windows), or once a grain shorter over them
   * (WINDOW_LENGTH_TRIAL_MARGIN_MS). Any end named while the shorter length is in force refuses it for the run.
   */
  private tryShorterLength(measured: number, windows: number): number {
    if (this.lengthTrial === "trying") this.lengthTrial = "refused";
    if (this.lengthTrial === "refused" || !this.endNamedAsDate) return measured;
    const shorter = measured - WINDOW_LENGTH_GRAIN_MS / windows + WINDOW_LENGTH_TRIAL_MARGIN_MS;
    if (shorter < WINDOW_MIN_WAIT_MS || shorter >= measured) return measured;
    this.lengthTrial = "trying";
    return shorter;
  }

  /** Paced within a window: a pass beyond the allowance shows it short (WINDOW_ALLOWANCE_GROWTH); the allowance's own last pass does not. */
  private growShortAllowance(): void {
    const passes = this.windowCarry + (this.segment?.passes ?? 0);
    if (passes <= this.allowance) return;
    this.allowance = passes * WINDOW_ALLOWANCE_GROWTH;
    this.allowanceGuessed = true;
  }

  /** Phase "window": unpaced, or at the pace of a limit inside the window (windowPace). */
  private windowSetting(): RateSetting {
    const pace = this.windowPace;
    if (pace === null) return { rate: null, burst: 1, carry: 0, phase: "window" };
    return { rate: pace, burst: Math.max(1, this.burstLow - 1), carry: this.carryAt(pace), phase: "window" };
  }

  /**
   * In phase "window", a 429 naming a wait too short for a window's end while the window's allowance is
   * not spent, and (its length known) well before the window in course ends: not the window's refusal
   * but a limit inside it (the document names a limit before authentication beside the workspace quota;
   * a per-client bucket in front of a workspace window of a minute refuses the window's allowance sent at
   * once). Taken for the window's end, each such 429 closed a "window" of a second: harness, 600 per
   * minute behind a 20/s bucket, 67 % of requests refused and 2.7x its least time.
   */
  private insideWindow(waitMs: number | null, windowPasses: number, now: number): boolean {
    if (this.setting.phase !== "window" || waitMs === null || waitMs <= 0 || waitMs >= WINDOW_MIN_WAIT_MS) return false;
    // Only a limit shown before the window (a rate the bounds proved from a bucket's 429s): a sliding log
    // frees its slots one by one and refuses between them with short waits too, and read as a limit inside
    // it, the pace it set from its first passes fell with each refusal (an e2e of 100 in any 4 s, on a
    // loaded machine, did not finish in its time).
    if (this.windowPace === null && this.low < 2 * MIN_RATE) return false;
    // Refused before any pass since the window opened: the opening came later than named or predicted (a date cut to its second).
    if (windowPasses === 0 || windowPasses >= this.allowance * WINDOW_INSIDE_SHARE) return false;
    if (this.windowEnd === null || this.windowMs === null) return true;
    const opened = this.predictedOpenAt ?? this.windowEnd + this.windowsSince * this.windowMs;
    return now + waitMs < opened + this.windowMs - WINDOW_MIN_WAIT_MS;
  }

  /**
   * A limit inside the window (insideWindow): from now on each window's allowance goes out paced. The
   * first pace is the least rate the bounds proved (the inner limit, a token bucket, refused first,
   * before the window showed); each further such 429 at that pace lowers it by WINDOW_PACE_RETRACT,
   * never below the window's own average. The window's grants and passes count on across the pause.
   */
  private paceWithinWindow(): void {
    this.keepGrants = true;
    const current = this.setting.rate;
    const pace = current !== null ? current * WINDOW_PACE_RETRACT : this.low;
    // Never below the window's own average (its allowance over its length, once known): sent evenly over
    // the window, the allowance still goes out within it, whatever the 429s were.
    const even = this.windowMs !== null && Number.isFinite(this.allowance) ? this.allowance / (this.windowMs / 1000) : 0;
    this.windowPace = Math.max(MIN_RATE, even, pace);
    this.setting = this.windowSetting();
    this.evidence.invalidate();
  }

  /**
   * A window found by polling opened in [earliest, latest], `windows` after the last found, after a refusal
   * from `refusedFrom`. Its length is taken at the least they allow: at least the refusal (every request
   * it refused fell in one window), and for each two such ends the later one's earliest less the earlier
   * one's latest, over the windows between. Openings predicted from it come early, never late; the first
   * one the refusal's length puts past the polled end, so the next window's opening is polled for from
   * there, not from its allowance's end (a 10 s window polled at a fifth of the refusal so far: about 25
   * 429s a window); and pairs far apart pin it within the polling's error over their count of windows.
   */
  private polledLength(windows: number, earliest: number, latest: number, refusedFrom: number): number | null {
    const last = this.polledEnds.at(-1);
    const index = last ? last.index + Math.max(1, windows) : 0;
    let length = earliest - refusedFrom;
    for (const e of this.polledEnds) length = Math.max(length, (earliest - e.latest) / (index - e.index));
    this.polledEnds.push({ index, earliest, latest });
    return length >= WINDOW_POLLED_MIN_MS ? length : null;
  }

  /**
   * The rates a token bucket could have and produce every pass and 429 so far (bucket-evidence.ts),
   * searched below the rate that drew the 429. Sound bounds when the server is a token bucket; when
   * none fits (a window, a quota that changed, noise beyond ours) the count bounds stand alone.
   * `stalled`: a pass of the cycle this 429 closed was answered late (stallInCycle).
   */
  private learnFromEvidence(rateDrewIt: number, stalled: boolean): void {
    if (!this.evidenceTrusted) {
      this.evidenceFits = false;
      return;
    }
    const refutedBefore = this.evidence.capacityRefuted;
    // A cycle the server may have stalled in (a pass answered late: `stalled`) does not refute the first
    // segment's bound on the capacity: what the stall held was decided together, at a time we do not know.
    // Refuted by such a cycle, the replay without the bound fitted a large capacity at a low rate: a 100/s
    // bucket of 10 at [31.8, 54.2] after the probe at 104 req/s (bounds held [79.6, 118.2]), and quiet steps
    // under 54 took 10 s each (harness, 150 ms stalls every 2 s, one seed of five: 2.27x; 1.24x with this).
    // The cycle is dropped instead, and the count bounds stand alone for this 429.
    let b = this.evidence.bounds(MIN_RATE, rateDrewIt * 1.02, (r) => this.evidenceNoise(r), !stalled);
    // Measured again, a replay far under what the run's own cycles proved is not taken (RELEARN_REPLAY_MIN_SHARE).
    if (b && this.relearned && b.high < this.cycleLow * RELEARN_REPLAY_MIN_SHARE) b = null;
    this.evidenceFits = b !== null;
    this.evidenceProbe = false;
    if (!b && stalled && !refutedBefore) this.evidence.forgetLastCycle();
    if (!b) return;
    // Refuted by this replay: what the first segment gave goes, and the replay without it bounds the rate.
    if (!refutedBefore && this.evidence.capacityRefuted) this.forgetFirstCapacity();
    const low = Math.max(this.low, b.low);
    const high = Math.min(this.high, b.high);
    if (low < high) {
      this.low = low;
      this.high = high;
    } else {
      this.low = b.low;
      this.high = b.high;
    }
    // The capacity the first segment shows at the fastest rate that fits: the pacer may hold that
    // much less one (its burst after a pause, and a late timer's fraction kept instead of lost:
    // at 39.3 req/s set, timers firing in whole milliseconds sent 38).
    const cap = Math.floor(this.evidence.capacityLow(this.high, EDGE_NOISE));
    if (cap > this.burstLow) this.burstLow = Math.min(cap, this.burstHigh);
    this.capacityFromCycles(b.low);
  }

  /** The noise the evidence's replay allows at rate `r`: half the spread of round trips measured, at least EVIDENCE_NOISE_MS. */
  private evidenceNoise(r: number): number {
    return EDGE_NOISE + (r * Math.max(EVIDENCE_NOISE_MS, this.roundTrips.spreadMs / 2)) / 1000;
  }

  /**
   * The capacity's bound from above, from the cycles closed at `low`, the least rate that fits
   * (bucket-evidence.ts capacityHigh): the first segment's passes bound it only loosely when it went
   * out slowly, and the count bounds (learnFromCounts, the quiet verdict) subtract it from every count.
   */
  private capacityFromCycles(low: number): void {
    const capHigh = this.evidence.capacityHigh(low, this.evidenceNoise(low));
    // +1 as for the first segment's bound (learnBurst): the 429 may have overtaken a request sent just before it.
    if (capHigh !== null && Math.ceil(capHigh) + 1 < this.burstHigh) this.burstHigh = Math.max(this.burstLow, Math.ceil(capHigh) + 1);
  }

  /**
   * A probe gone quiet: the evidence replayed with the cycle in course (each of its passes found a
   * token) bounds the rate from below jointly with the capacity the closed cycles allow, which the
   * count bound (passes less the most the bucket held, burstHigh) cannot.
   */
  private quietEvidence(rate: number, now: number): void {
    if (now - this.quietEvidenceAt < QUIET_EVIDENCE_EVERY_MS) return;
    this.quietEvidenceAt = now;
    if (this.high <= this.low * QUIET_EVIDENCE_MIN_SPAN || !this.evidenceTrusted || !this.evidenceFits || this.evidence.capacityRefuted || !Number.isFinite(this.high)) return;
    const b = this.evidence.bounds(MIN_RATE, this.high * 1.02, (r) => this.evidenceNoise(r), false);
    if (!b) return;
    this.low = Math.max(this.low, Math.min(rate, b.low));
    this.capacityFromCycles(b.low);
  }

  /** Re-evaluate: ramp growth, quiet verdicts and count bounds. True when the rate changed. */
  tick(now: number): boolean {
    const before = this.setting.rate;
    const s = this.setting;
    if (s.phase === "ramp" && s.rate !== null) {
      const elapsed = now - this.grownAt;
      // A step waits for the answers to the last one: 100 ms away, a step of 250 ms doubled again before a 429 could say the rate was too much.
      if (elapsed >= Math.max(RAMP_STEP_MS + this.roundTrips.latencyMs, (RAMP_STEP_SENDS / s.rate) * 1000)) {
        // Grow only a rate we really send at: one the in-flight limit or the work holds back says nothing when it draws no 429.
        const kept = this.sends - this.sendsAtStep >= QUIET_SHARE * this.sendable(s.rate) * (elapsed / 1000) - 1;
        this.grownAt = now;
        this.sendsAtStep = this.sends;
        // The carry follows the rate: a ramp that began below CARRY_FROM_RATE and kept the carry it
        // began with sent 185 req/s at 243 set (whole-millisecond timers, late), never reached a
        // 200 req/s quota, and so never learnt it.
        if (kept) {
          const next = this.rampStep(s.rate);
          this.setting = { ...s, rate: next, carry: this.carryAt(next) };
        }
      }
    } else if (s.phase === "contested") {
      if (s.rate !== null && this.contestedQuiet(s.rate, now)) this.contestedRise(s.rate, now);
    } else if (s.phase === "probe" || s.phase === "hold") {
      if (this.staleHold(now)) return this.setting.rate !== before;
      this.learnFromCounts(now);
      if (s.phase === "probe" && s.rate !== null && this.quietAt(s.rate, now)) {
        // Quiet for T: the N requests that passed came from at most B in the bucket and r × T, so
        // r ≥ (N − B) / T. N counted, not x × T: timers that fire late send below the rate set.
        const t = (now - this.rateSetAt) / 1000;
        const noise = EDGE_NOISE + (s.rate * EDGE_NOISE_MS) / 1000;
        // Spaced from answers, a round trip goes into each interval: what passed is counted at the rate set.
        const scale = s.rate / this.sendable(s.rate);
        this.low = Math.max(this.low, Math.min(s.rate, ((this.passesAtRate - this.heldAt(this.rateSetAt) - noise) / t) * scale));
        // ...only where counts cannot tell: the bucket may hold more than QUIET_MS at the rate sends.
        if (this.unnamed && this.heldAt(now) > (s.rate * QUIET_MS) / 1000) this.quietRate = Math.max(this.quietRate, s.rate);
        this.quietEvidence(s.rate, now);
      }
      this.probe(now);
    }
    return this.setting.rate !== before;
  }

  /** A 429 on a contested quota: hold at CONTESTED_CUT of the rate that drew it; the bounds follow the rate (no fixed bucket to learn). */
  private contestedThrottle(drew: number, now: number): void {
    this.contested = { drew, at: now, sends: this.sends, rises: 0 };
    this.evidenceTrusted = false;
    this.evidenceFits = false;
    this.evidenceProbe = false;
    const rate = Math.max(MIN_RATE, drew * CONTESTED_CUT);
    this.low = rate;
    this.high = drew;
    this.setRate(rate, "contested", now);
  }

  /** Contested: CONTESTED_QUIET_MS since the last 429 or rise, really sending at `rate` (not starved for work). */
  private contestedQuiet(rate: number, now: number): boolean {
    const c = this.contested!;
    const elapsed = now - c.at;
    return elapsed >= CONTESTED_QUIET_MS && this.sends - c.sends >= QUIET_SHARE * this.sendable(rate) * (elapsed / 1000);
  }

  /** Contested and quiet: back toward the rate of the last 429, then beyond it by a step doubling at each rise in a row. */
  private contestedRise(rate: number, now: number): void {
    const c = this.contested!;
    const back = c.drew * CONTESTED_RETURN;
    const beyond = rate >= back;
    const next = beyond ? rate * (1 + Math.min(CONTESTED_MAX_STEP, CONTESTED_STEP * 2 ** c.rises)) : back;
    this.contested = { ...c, at: now, sends: this.sends, rises: beyond ? c.rises + 1 : c.rises };
    this.low = next;
    this.high = Math.max(this.high, next);
    this.setRate(next, "contested", now);
  }

  /**
   * Started from an earlier run's bounds, the first 429 at the rate started from, once a run, says nothing
   * against them when the bucket was emptied before the run (the run's first request refused: another client,
   * or the run before) or holds one token (a pair that jitter on the way brought within a token interval is
   * refused whatever the rate): the pause, and on at the same rate. Taken as the quota moved, a bucket emptied
   * before each run (40/s burst 10) went from 1.13x to 1.54x, and one of one token (100/s) to 1.69x: a relearn
   * sends a burst unpaced, which a bucket of one token refuses but for one request.
   */
  private startExcused(): boolean {
    if (this.startExcuseUsed || !(this.passes === 0 || this.oneToken)) return false;
    this.startExcuseUsed = true;
    this.started = true;
    if (this.passes === 0) {
      // Nothing passed: the evidence and the cycle start after this pause, as a run that met an emptied bucket does (startedEmpty).
      this.evidence = new BucketEvidence();
      this.cycle = null;
      this.nextFromFull = true;
    }
    return true;
  }

  /**
   * Started from an earlier run's bounds (startFrom), no 429 since: hold at `low`, and once the work
   * left is worth a pause, look once whether the quota has risen (a larger plan), LOOK_ABOVE over the
   * earlier run's 429. That probe's 429 says it has not (one pause; throttled() takes the earlier bound
   * back). Quiet long enough for the counts to prove more than that bound, it has: ramp from there.
   * Held without looking, a quota raised from 20 to 80 req/s was sent at 19.9 for a whole backfill (4.05x).
   */
  private lookAbove(now: number): void {
    const top = this.priorHigh * LOOK_ABOVE;
    if (this.setting.phase === "probe") {
      if (this.low < this.priorHigh) return;
      this.started = false;
      this.holdLook = null;
      return this.setRate(Math.max(MIN_RATE, this.low), "ramp", now);
    }
    if (this.lookAboveWorthAPause()) this.setRate(top, "probe", now);
  }

  /** A 429 came at the rate in force (throttledAtRate), at `now` (staleHold's quiet counts from it). */
  private markThrottled(now: number): void {
    this.throttledAtRate = true;
    this.lastThrottledAt = now;
  }

  /**
   * Probing or holding under bounds whose top is under STALE_HOLD_MAX_RATE, quiet for staleHoldQuietMs since the
   * last 429 (named waits only): look above them as a run started from an earlier run's bounds does, ramping from `low` with those bounds kept
   * (priorHigh). A 429 puts them back (throttled: `started`), one pause; the next look waits twice as long. Quiet,
   * the ramp goes on. True when it looked.
   */
  private staleHold(now: number): boolean {
    if (this.unnamed || this.started) return false;
    if (this.high > STALE_HOLD_MAX_RATE) return this.lookAboveHold(now);
    if (now - this.lastThrottledAt < this.staleHoldQuietMs) return false;
    this.staleHoldQuietMs *= 2;
    this.priorHigh = this.high;
    this.high = Infinity;
    this.started = true;
    this.setRate(Math.max(MIN_RATE, this.low), "ramp", now);
    return true;
  }

  /**
   * Held at bounds of any rate (or probing at one rate), quiet for holdLookQuietMs since the last 429 and the last change of rate, and the work left worth it
   * (HOLD_LOOK_PAUSE_SHARE): look once above the bounds' top, with those bounds kept (priorHigh), as lookAbove does
   * for a run started from an earlier run's. Not under N per second (its own look, keepPerSecondHold), nor on a
   * quota that refused a rate it had passed or a bucket of one token (their 429s at the top say other things). True when it looked.
   */
  private lookAboveHold(now: number): boolean {
    if ((this.setting.phase !== "hold" && this.setting.phase !== "probe") || this.perSecondAllowance !== null || this.oneToken || !Number.isFinite(this.high)) return false;
    // A quota that refused rates it had passed is shared or moving: the contested mode's quiet rises look for it. A look made before such a 429 still costs a shared quota a little (40/s burst 4 with another client at 15/s, seed 2: 2.180 -> 2.234x).
    if (this.contested !== null || this.relearned || !this.evidenceTrusted) return false;
    // Quiet, and at one rate: a probe that quiet verdicts still move is finding the quota (100/s burst 20 100 ms away, looked at 10 s: 1.065x -> 1.10x).
    const since = Math.max(this.lastThrottledAt, this.grownAt);
    if (now - since < this.holdLookQuietMs || !this.lookAboveWorthAPause(HOLD_LOOK_PAUSE_SHARE)) return false;
    this.holdLookQuietMs *= HOLD_LOOK_BACKOFF;
    this.holdLook = { low: this.low, high: this.high, rate: this.setting.rate ?? this.holdRate(this.low), phase: this.setting.phase };
    this.priorHigh = this.high;
    this.high = Infinity;
    this.started = true;
    // At the top's LOOK_ABOVE from a probe as from a hold: lookAbove takes it from there (a ramp once counts prove the top).
    this.setRate(this.priorHigh * LOOK_ABOVE, "probe", now);
    return true;
  }

  /**
   * The look above a hold (lookAboveHold) drew its 429: the quota has not risen. Back to the bounds and the rate it
   * looked from, and nothing else read into the 429 (probed again from it, each look cost two more 429s: 100/s
   * burst 20 100 ms away over 60 s went 1.065x -> 1.10x).
   */
  private holdLookRefused(now: number): void {
    const { low, high, rate, phase } = this.holdLook!;
    this.holdLook = null;
    this.low = Math.min(Math.max(low, this.low), high);
    this.high = high;
    this.setRate(rate, phase, now);
  }

  /**
   * Looking above costs a pause when the quota has not risen, which is the likely case, and gains only when
   * it has: not probeWorthAPause's even odds over the bounds. Worth it once the caller has said how much work
   * is left and the pause is at most LOOK_ABOVE_PAUSE_SHARE of it. A 5 req/s bucket of one token, 13 requests
   * to go, looked by the even odds and drew a 429 in every incremental run. (Nor "free" while the bucket's
   * least burst outlasts the look: the pacer spends that burst as the run starts, and 200/s burst 20 drew its 429.)
   */
  private lookAboveWorthAPause(share = LOOK_ABOVE_PAUSE_SHARE): boolean {
    if (this.remaining === null) return false;
    const horizonS = this.remaining / this.low;
    const pauseS = Math.max(MIN_PAUSE_COST_MS, this.lastPauseMs - (this.burstLow / this.low) * 1000) / 1000;
    return pauseS <= share * horizonS;
  }

  /** The ramp's next rate after `rate`: doubling, but far from the server only up to the first segment's rate and slower from there (RAMP_FACTOR_ABOVE_FIRST). */
  private rampStep(rate: number): number {
    const first = this.firstSegmentRate;
    if ((rate * this.roundTrips.shortestMs) / 1000 < RAMP_CAREFUL_IN_FLIGHT) return rate * RAMP_FACTOR;
    if (rate >= first) return rate * RAMP_FACTOR_ABOVE_FIRST;
    return Math.min(rate * RAMP_FACTOR, first);
  }

  /**
   * The 429s so far fit N requests per second (second-window.ts): hold evenly at one under N, whatever
   * the bucket's bounds say (counts that cross a second's start read two allowances as a rate).
   */
  private holdPerSecond(refuted: boolean, now: number): boolean {
    if (this.perSecondLooking) return this.perSecondLookRefused(now);
    if (this.perSecondAllowance !== null) {
      // Refused while sent evenly under N: not N per second. The bucket's bounds come back, under the rate that drew it.
      this.second.ruleOut();
      this.low = Math.min(this.perSecondBounds.low, this.perSecondAllowance - 1);
      this.high = Math.min(this.perSecondBounds.high, this.perSecondAllowance - 1);
      this.perSecondAllowance = null;
      // Down to the bounds' hold first (a hold only rises), then the 429 is read as a bucket's: its long cycle pins the rate.
      this.setRate(this.holdRate(this.low), "hold", now);
      return false;
    }
    // Where the bucket fails, or where holding under N tests it, two refused seconds; elsewhere, where a wrong N
    // might never be refused, one more (a bucket's counts drift apart from cycle to cycle). Under `low` too: counts
    // across a second's start proved 169-196 req/s of a counter of 100, each probe down to them refused (real CLI 1.17-1.20x).
    const two = this.second.allowance();
    if (two === null) return false;
    const outside = refuted || two - 1 > this.high;
    const n = outside ? two : this.second.allowance(PER_SECOND_WITHIN_REFUSED);
    if (n === null) return false;
    this.perSecondAllowance = n;
    this.perSecondBounds = { low: this.low, high: this.high };
    this.perSecondHeldAt = now;
    this.low = n - 1;
    this.high = n;
    this.setRate(n - 1, "hold", now);
    return true;
  }

  /**
   * Held under N per second (holdPerSecond): the hold stays, whatever counts say, until a 429 rules N out, or a
   * look above it passes (PER_SECOND_LOOK). False when the look passed: the bucket's probe goes on from there.
   */
  private keepPerSecondHold(now: number): boolean {
    const n = this.perSecondAllowance;
    if (n === null) return false;
    if (this.perSecondLooking) return this.quietAt(this.setting.rate!, now) ? this.perSecondLookPassed() : true;
    if (this.perSecondLookWorthIt(now)) {
      this.perSecondLooking = true;
      this.setRate(n * PER_SECOND_LOOK, "probe", now);
      return true;
    }
    if (this.setting.phase !== "hold" || this.setting.rate !== n - 1) this.setRate(n - 1, "hold", now);
    return true;
  }

  /**
   * Quiet under N per second for perSecondLookQuietMs, and the work left long enough: a counter's pause is its
   * whole wait (what its window passed is not refilled by it, as a bucket's burst is), PER_SECOND_LOOK_PAUSE_SHARE of the work left at most.
   */
  private perSecondLookWorthIt(now: number): boolean {
    if (this.remaining === null || now - this.perSecondHeldAt < this.perSecondLookQuietMs) return false;
    return this.lastPauseMs / 1000 <= PER_SECOND_LOOK_PAUSE_SHARE * (this.remaining / this.low);
  }

  /** The look above N per second was refused, as such a counter refuses it: hold under N again, the next look further off. */
  private perSecondLookRefused(now: number): boolean {
    const n = this.perSecondAllowance!;
    this.perSecondLooking = false;
    this.perSecondLookQuietMs *= PER_SECOND_LOOK_BACKOFF;
    this.perSecondHeldAt = now;
    this.low = n - 1;
    this.high = n;
    this.setRate(n - 1, "hold", now);
    return true;
  }

  /**
   * Quiet at PER_SECOND_LOOK × N for QUIET_MS: no counter of N per second. N is ruled out for the run and nothing
   * bounds the rate from above: the ramp grows from what the look proved (tick raised `low` to it).
   */
  private perSecondLookPassed(): boolean {
    this.second.ruleOut();
    this.perSecondAllowance = null;
    this.perSecondLooking = false;
    this.high = Infinity;
    return false;
  }

  /** Send inside [low, high]: halve the gap (in ratio when wide, in difference when narrow), or hold just below low. */
  private probe(now: number): void {
    if (this.keepPerSecondHold(now)) return;
    // The ramp's floor is for the first probe after the ramp only, whichever way it goes.
    const rampFloor = this.rampFloor;
    this.rampFloor = 0;
    if (!Number.isFinite(this.high)) {
      if (this.started) return this.lookAbove(now);
      // Nothing above: grow from low as the ramp does.
      if (this.setting.phase !== "ramp") this.setRate(Math.max(MIN_RATE, this.low, this.setting.rate ?? 0), "ramp", now);
      return;
    }
    // Counts say more passed than `high` allows: that 429 came from noise, not the rate. Reopen just above.
    if (this.low >= this.high) this.high = this.low * (1 + 4 * (TIGHT_SPAN - 1));
    // The bounds' top went quiet (unnamed waits only, see quietRate): look above it, as the ramp does.
    if (this.quietRate >= this.high) {
      this.high = this.quietRate * RAMP_FACTOR;
      this.evidenceProbe = false;
      this.evidenceFits = false;
    }
    const low = Math.max(MIN_RATE, this.low, this.quietRate);
    if (this.perSecondWorthTrying()) {
      // Kept like an evidence probe: a window of a second never draws its 429 there; a bucket draws it, and its long cycle pins the rate.
      const r = this.evidence.capacityLow(this.high, EDGE_NOISE) * (1 - 2 * HOLD_MARGIN);
      this.perSecondTried = true;
      this.probePerSecond(r, low, now);
      // Its quiet is followed by one more at all the first segment's passes per second (perSecondAllWorthTrying).
      this.perSecondQuietRate = r;
      return;
    }
    const all = this.perSecondAllWorthTrying(low, now);
    if (all !== null) {
      this.perSecondQuietRate = null;
      return this.probePerSecond(all, low, now);
    }
    const span = this.high / low;
    if (span <= TIGHT_SPAN || (this.setting.phase === "hold" && !this.probeWorthAPause(low, now))) {
      // Held until `low` has risen by a margin (counts go on) or a 429 reopens the probe.
      const current = this.setting.rate;
      if (this.setting.phase !== "hold" || current === null || this.holdRate(low) > current * (1 + HOLD_MARGIN)) this.setRate(this.holdRate(low), "hold", now);
      return;
    }
    const current = this.setting.rate;
    if (this.unnamed && this.setting.phase === "probe" && current !== null) {
      // Unnamed waits (quietRate): a probe that went quiet goes on at the bounds' top, which keeps its place until quiet or a 429.
      if (this.quietRate >= current) {
        this.lowAtSet = low;
        return this.setRate(this.high, "probe", now);
      }
      if (current * (1 + HOLD_MARGIN) >= this.high && !this.throttledAtRate) return;
    }
    // An evidence probe keeps its place until its 429 (counts may raise `low` meanwhile, not move it).
    if (this.setting.phase === "probe" && this.evidenceProbe && current !== null) return;
    // At the evidence's top only where 429s name no wait: where they name one, each probe at the top was a sure pause
    // that narrowed the span no more than a probe at its middle, a coin's pause (harness 100/s burst 20 100 ms away
    // 1.217 -> 1.151x; the four sets -0.47 %, -0.16 %, -0.01 %, -0.14 %); without a wait, counts cannot tell, and the top's cycle can.
    if (this.unnamed && this.evidenceFits && this.evidence.capacityLow(this.high, EDGE_NOISE) >= EVIDENCE_PROBE_MIN_BURST && span <= EVIDENCE_PROBE_SPAN && span < this.evidenceSpan ** 0.5) {
      // The evidence bounds the quota whatever the capacity: send at its top. Above the quota the
      // server's bucket drains and we lose nothing until its 429, whose cycle then pins the rate
      // (one pause, the same that any step above costs); a step below loses the gap until a quiet
      // verdict, which converges only as the capacity over the time. Only while each such 429
      // at least halves the span (in ratio): a bucket of one token drains at once, and its cycles say little.
      this.evidenceSpan = span;
      this.evidenceProbe = true;
      this.lowAtSet = low;
      this.setRate(this.high, "probe", now);
      return;
    }
    // The first probe after the ramp goes no lower than the ramp's step before the one that drew the 429
    // (TCP's ssthresh, half the window that lost): that step went a whole step without one. Unless the
    // bounds put that step above the quota too (its drain was still under way when the next began).
    const floor = rampFloor < this.high ? rampFloor : 0;
    const mid = Math.max(span > 2 ? Math.sqrt(low * this.high) : (low + this.high) / 2, floor);
    // A probe rate keeps its place until its verdict: a 429 (even one that left `high` above it: a quiet top
    // doubled over it kept a 20/s bucket of 50 without Retry-After probing at 30 through 40 429s), or
    // `low` risen halfway to it (quiet long enough).
    if (this.setting.phase === "probe" && current !== null && current < this.high && low < (this.lowAtSet + current) / 2 && !this.throttledAtRate) return;
    this.lowAtSet = low;
    this.setRate(mid, "probe", now);
  }

  /**
   * Once a run: is the quota perhaps N per second, a fixed window of one second (or a log of the last
   * second) that admitted the first segment's N at once (the evidence's least capacity)? Its 429s name a wait of 1 s, as a token bucket's
   * do, and replayed as a bucket it reads as about two thirds of N (50 per second: 33-36 req/s, held
   * there for the run, 1.45x its least time). Worth a probe at N per second when the first segment passed
   * more than the bounds' top allows in a second: a bucket that holds more than a second of its rate is
   * rare, and against one this probe is only the pin the evidence would send at its top.
   */
  private perSecondWorthTrying(): boolean {
    if (this.perSecondTried || this.lastNamedMs === null || this.lastNamedMs >= WINDOW_MIN_WAIT_MS) return false;
    // The least capacity the first segment shows at the bounds' top: its passes less what that rate refilled meanwhile (behind latency, many).
    const n = Number.isFinite(this.high) ? this.evidence.capacityLow(this.high, EDGE_NOISE) : 0;
    return n >= WINDOW_MIN_PASSES && n * (1 - 2 * HOLD_MARGIN) > this.high * PER_SECOND_BEYOND;
  }

  /** Probe at `rate` from the first segment's passes per second, kept like an evidence probe (see probe()). */
  private probePerSecond(rate: number, low: number, now: number): void {
    this.high = Math.max(this.high, rate);
    this.evidenceProbe = true;
    this.lowAtSet = low;
    this.setRate(rate, "probe", now);
  }

  /**
   * The probe at the first segment's least capacity per second went quiet (QUIET_MS at it, no 429):
   * a window of a second admits all the first segment's passes each second, not that capacity less
   * what the bucket's rate would have refilled meanwhile. The rate to probe at next (all those passes per
   * second, less the hold's margins), or null. A window of 50 per second was held at 44.6 req/s by the
   * first probe (harness, 1.23x its least time); a bucket whose rate is that high draws its 429 there and
   * its cycle pins the rate.
   */
  private perSecondAllWorthTrying(low: number, now: number): number | null {
    const quiet = this.perSecondQuietRate;
    if (quiet === null || this.setting.rate !== quiet || !this.quietAt(quiet, now)) return null;
    const all = this.evidence.capacityLow(0, EDGE_NOISE) * (1 - 2 * HOLD_MARGIN);
    return all > low * TIGHT_SPAN ? all : null;
  }

  /**
   * A probe at the bounds' top, or holding at `low` (holdRate), for the work left (MIN_HORIZON_MS)? The
   * quota taken anywhere in [low, high], evenly: holding loses the gap to it; the probe loses a pause
   * if its 429 comes within the horizon, that is when the bucket's capacity drains at what the probe
   * sends beyond the quota before the run ends (a quota under high − capacity ÷ horizon).
   */
  private probeWorthAPause(low: number, now: number): boolean {
    const high = this.high;
    const horizonS = (this.remaining !== null ? (this.remaining / low) * 1000 : Math.max(MIN_HORIZON_MS, now - (this.firstSentAt ?? now))) / 1000;
    const gainS = horizonS * (1 - this.holdRate(low) / ((low + high) / 2));
    const drawsOne = Math.min(1, Math.max(0, (high - this.burstLow / horizonS - low) / (high - low)));
    const pauseS = Math.max(MIN_PAUSE_COST_MS, this.lastPauseMs - (this.burstLow / low) * 1000) / 1000;
    return gainS > drawsOne * pauseS;
  }

  /**
   * The rate that drew a 429 sent at `sentAt`: the fastest we sent at in its segment up to then.
   * Not the rate in force when it is read: 100 ms away the ramp doubled from 168 to 336 req/s
   * before the 429 of 168 came back, and the bracket it left was [66, 336] instead of [66, 168].
   * Nor the rate at its send alone: a bucket emptied by a faster rate just before still refuses.
   */
  private rateThatDrew(sentAt: number, current: number): number {
    let most = 0;
    for (const [at, r] of this.sentRates) {
      if (at > sentAt) break;
      most = Math.max(most, r ?? Infinity);
    }
    return Math.min(most > 0 && Number.isFinite(most) ? most : current, this.mostSendable);
  }

  /**
   * The fastest we can send at all: each request holds an in-flight slot for at least the shortest
   * round trip, so over any span of a few round trips no more than the ceiling goes out per round trip
   * (Little's law). A rate set above it went out at this at most. 100 ms away with 32 in flight, the ramp set 784 req/s and sent
   * 320; taken as the rate that drew the 429, its bracket was [87, 784], the next probe (the ramp's step
   * before, 392) went out at 320 again, and each of those 429 episodes refused 20 requests in flight.
   */
  private get mostSendable(): number {
    const { ceiling, shortestMs } = this.roundTrips;
    return ceiling !== undefined && shortestMs > 0 ? (ceiling * 1000) / shortestMs : Infinity;
  }

  /**
   * A 429 at a steady rate above the quota's ends a span in which the bucket only drained
   * (it never overflowed): the passes of the span are at least what the rate refilled in it,
   * less one token. So the rate is at most those passes, plus one, over the span.
   */
  private rateCountHigh(sentAt: number): number {
    const spanMs = sentAt - this.rateSetAt;
    if (!(spanMs >= COUNT_MIN_MS) || this.setting.phase === "ramp" || this.stalledAtRate) return Infinity;
    // Sent well below the rate in force (a stall, work running short): the bucket may have filled and overflowed.
    if (this.sends - this.sendsAtSet < STEADY_SHARE * this.sendable(this.setting.rate ?? 0) * (spanMs / 1000)) return Infinity;
    const noise = EDGE_NOISE + ((this.setting.rate ?? 0) * EDGE_NOISE_MS) / 1000;
    return (this.passesAtRate + this.spentAtRate + 1 + noise) / (spanMs / 1000);
  }

  /** QUIET_MS at `rate` without a 429, really sending (not starved for work). */
  private quietAt(rate: number, now: number): boolean {
    const elapsed = now - this.rateSetAt;
    return !this.throttledAtRate && elapsed >= QUIET_MS && this.sends - this.sendsAtSet >= QUIET_SHARE * this.sendable(rate) * (elapsed / 1000);
  }

  /**
   * What the server demonstrably accepted since the last pause ended: those passes, less
   * the most its bucket could have held then, came from its rate over that time.
   */
  private learnFromCounts(until: number): void {
    const seg = this.segment;
    if (!seg || !Number.isFinite(this.burstHigh)) return;
    const elapsed = until - seg.startAt;
    if (elapsed < COUNT_MIN_MS) return;
    const noise = EDGE_NOISE + ((this.setting.rate ?? 0) * EDGE_NOISE_MS) / 1000;
    const low = (seg.passes - this.heldAt(seg.startAt) - noise) / (elapsed / 1000);
    if (low > this.low) this.low = low;
  }

  /**
   * The most the server's bucket can have held at `at`: its capacity, and no more than it refilled
   * at `high` since the last 429 found it empty. A quota that admitted 200 at once and then refused
   * for seconds (a window without Retry-After, a slow bucket of large capacity) had its bounds put at
   * 1-4 req/s; with the capacity alone, counts at 1.4 req/s proved nothing for minutes.
   */
  private heldAt(at: number): number {
    const c = this.cycle;
    if (!c || !Number.isFinite(this.high) || at < c.startAt) return this.burstHigh;
    return Math.min(this.burstHigh, 1 + EDGE_NOISE + (this.high * (at - c.startAt)) / 1000);
  }

  /**
   * The burst, from the passes of the segment a 429 ended: from a full bucket (the run's
   * start) they bound it from above; after a pause, what the rate cannot explain of them is
   * what the bucket held, a bound from below.
   */
  private learnBurst(sentAt: number): void {
    const seg = this.segment;
    if (!seg) return;
    const passed = seg.passes;
    const activeS = Math.max(0, sentAt - seg.startAt) / 1000;
    const noise = EDGE_NOISE + (this.high * EDGE_NOISE_MS) / 1000;
    // +1: the 429 may have overtaken one request sent just before it.
    if (seg.fromFull && !Number.isFinite(this.burstHigh)) this.burstHigh = passed + 1;
    if (Number.isFinite(this.high)) {
      const held = passed - this.high * activeS - noise;
      if (held > this.burstLow) this.burstLow = Math.min(Math.floor(held), this.burstHigh);
    }
  }

  /**
   * Where to hold given `low`: at it once the bucket has shown HOLD_AT_LOW_MIN_BURST tokens (they
   * absorb a late timer's catch-up), HOLD_MARGIN below it otherwise.
   */
  private holdRate(low: number): number {
    return this.burstLow >= HOLD_AT_LOW_MIN_BURST ? low : low * (1 - HOLD_MARGIN);
  }

  /** The pacer's carry at rate `r`: a fraction of a token, from CARRY_FROM_RATE up, when the server's bucket likely holds several. */
  private carryAt(r: number): number {
    return this.burstHigh >= CARRY_MIN_BURST_HIGH && !this.oneToken ? carryAtRate(r) : 0;
  }

  private setRate(rate: number, phase: RatePhase, now: number): void {
    const r = Math.max(MIN_RATE, rate);
    // A probe at the evidence's top is above the quota: the server's bucket is used up as it drains,
    // and a burst at the pause's end would only shorten the cycle whose 429 is to pin the rate.
    // Held under N per second, no burst: a second holds at most the rate and the pacer's carry.
    const burst = (this.evidenceProbe && phase === "probe") || this.perSecondAllowance !== null ? 1 : Math.max(1, this.burstLow - 1);
    const carry = this.carryAt(r);
    if (r !== this.setting.rate || phase !== this.setting.phase) {
      this.rateSetAt = NaN;
      this.passesAtRate = 0;
      this.spentAtRate = 0;
      this.stalledAtRate = false;
      this.throttledAtRate = false;
      this.sendsAtSet = this.sends;
      this.grownAt = now;
    }
    this.setting = { rate: r, burst, carry, phase };
  }
}
