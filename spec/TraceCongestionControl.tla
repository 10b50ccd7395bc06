----------------------- MODULE TraceCongestionControl -----------------------
(***************************************************************************)
(* Trace validation: is an observed run a behaviour of CongestionControl?  *)
(* harness/model/tracefile.py writes the normalised trace (docs/trace.md)  *)
(* as the module TraceLog: a sequence of records in time order, plus the   *)
(* trace's constants. A cursor walks the sequence; each record kind maps   *)
(* to the spec's action(s) with the record's values as parameters, and     *)
(* what the spec does not model is a stuttering step. The run is accepted *)
(* when the cursor passes the last record: TLC's depth is Len(TraceLog)+1. *)
(* (The jar from PyPI has no POSTCONDITION or ALIAS; harness/model reads    *)
(* the depth instead.)                                                     *)
(*                                                                         *)
(* Record fields (-1 where a field does not apply):                        *)
(*   k     "sent" "acked" "lost" "pto" "cwnd" "ssthresh" "ecn" "app"       *)
(*         "ackonly" "ackend" "other" ("ackonly": an ACK of a packet never *)
(*         in flight; "ackend": the ACK's losses, acknowledgements and     *)
(*         window records are over, A.7 resets the PTO backoff;          *)
(*         "app": the sender became application limited, el TRUE,         *)
(*         or stopped being so, el FALSE; from the capture's STREAM frames  *)
(*         and the bytes in flight, harness/observe/appdata.py)             *)
(*         ("ecn": the ACK whose largest acknowledged packet was the one    *)
(*         "acked" just before raised the CE count for a mark of the link's;  *)
(*         read from the decrypted capture and the ground truth)             *)
(*   pn    the packet's send index (the order it was sent in, over all     *)
(*         spaces: RFC 9002 compares send times, B.6)                      *)
(*   size  its bytes;  el  ack-eliciting (BOOLEAN)                         *)
(*   cwnd, ssth, pto   the logged value;  line  the NDJSON line (1-based)  *)
(***************************************************************************)
EXTENDS CongestionControl, TraceLog, Sequences, TLC

VARIABLE cursor
\* <<lo, hi>> from a collapse that chose ssthresh in lo..hi (OnPersistentCongestion
\* with a reduction due) until the next logged ssthresh, else <<>>. That record keeps
\* only the choice nearest the logged value, which is within Tolerance of it if any
\* choice is, so the record is judged as before; without it TLC carried one state
\* per value of the range (some 2500) to the end of the trace: 2.1 million states and
\* 45 s for one blackhole run of aioquic, against 12 thousand and 2.7 s. Keeping a
\* choice the model made, it accepts nothing the model did not allow before.
VARIABLE ssth_choice

E == TraceLog[cursor]

\* Printed for coverage: the model state before the step, the action, the state after.
\* (Used last in a step, when every primed variable is known.)
Step(name) == PrintT(<<"step", E.line, CcState, name, CcState'>>)

\* A validation resumed after a deviation (harness/model/validate.py) starts at
\* record TraceStart from the state TraceResume: the model's state before the
\* unmatched record, with what that record logged adopted. So one run lists every
\* distinct deviation instead of stopping at the first.
Resumed ==
    /\ congestion_window = TraceResume.congestion_window /\ ssthresh = TraceResume.ssthresh
    /\ bytes_in_flight = TraceResume.bytes_in_flight /\ inflight = TraceResume.inflight
    /\ largest_sent = TraceResume.largest_sent /\ largest_acked = TraceResume.largest_acked
    /\ recovery_start = TraceResume.recovery_start /\ in_recovery = TraceResume.in_recovery
    /\ credit = TraceResume.credit /\ carry = TraceResume.carry
    /\ reduction_due = TraceResume.reduction_due /\ lost_since_update = TraceResume.lost_since_update
    /\ pto_count = TraceResume.pto_count /\ ack_pending = TraceResume.ack_pending
    /\ app_limited = TraceResume.app_limited
    /\ cause = TraceResume.cause /\ reductions = TraceResume.reductions

\* The line of the last record taken as a deviation of a kind already reported
\* (ToleratedWindow), so the ssthresh logged with it is part of it; -1: none.
VARIABLE tolerated

TraceInit ==
    /\ cursor = TraceStart /\ ssth_choice = <<>> /\ tolerated = -1
    /\ IF TraceStart = 1 THEN Init ELSE Resumed

IsSent == E.k = "sent" /\ OnPacketSent(E.pn, E.size, E.el) /\ Step("OnPacketSent")

IsAcked == E.k = "acked" /\ OnPacketsAcked(E.pn, E.size) /\ Step("OnPacketsAcked")

IsLost ==
    /\ E.k = "lost"
    /\ \/ OnPacketsLost(E.pn, E.size) /\ Step("OnPacketsLost")
       \/ OnProbeLoss(E.pn, E.size) /\ Step("OnProbeLoss")

IsEcn == E.k = "ecn" /\ OnEcnCe /\ Step("OnEcnCe")

IsPto == E.k = "pto" /\ OnPtoExpired /\ (E.pto < 0 \/ pto_count' = E.pto) /\ Step("OnPtoExpired")

\* A logged window equal to the model's is no step; a different one must be one
\* of the window's moves, with the logged value.
IsWindow ==
    /\ E.k = "cwnd"
    /\ IF E.cwnd = congestion_window
       THEN UNCHANGED <<vars, ssth_choice>>
       ELSE /\ congestion_window' = E.cwnd
            /\ \/ GrowWindow /\ UNCHANGED ssth_choice /\ Step("GrowWindow")
               \/ ReduceWindow /\ ssth_choice' = <<>> /\ Step("ReduceWindow")
               \/ OnPersistentCongestion
                  /\ ssth_choice' = (IF reduction_due THEN <<ReductionLow, ReductionHigh>> ELSE ssth_choice)
                  /\ Step("OnPersistentCongestion")

\* Logged after the window of the same metrics line, so a reduction has set the
\* model's ssthresh already. A first finite ssthresh without a loss ends slow start.
IsSsthresh ==
    /\ E.k = "ssthresh"
    /\ ssth_choice' = <<>>
    /\ IF ssthresh = Infinity
       THEN OnSlowStartExit(E.ssth) /\ Step("OnSlowStartExit")
       ELSE /\ E.ssth - ssthresh <= Tolerance /\ ssthresh - E.ssth <= Tolerance
            /\ ssth_choice # <<>> => ssthresh = Min(Max(E.ssth, ssth_choice[1]), ssth_choice[2])
            /\ UNCHANGED vars

\* An acknowledgement of a packet never in flight (ACK-only): §6.2.1 resets the PTO
\* backoff "when an acknowledgment is received" (A.7: any packet newly acknowledged),
\* so its ACK may, once processed; nothing else of the model moves (the largest
\* acknowledged in flight is what its loss detection compares with).
IsAckOnly ==
    /\ E.k = "ackonly"
    /\ \/ UNCHANGED vars
       \/ /\ ~ack_pending /\ pto_count > 0 /\ ack_pending' = TRUE
          /\ UNCHANGED <<congestion_window, ssthresh, bytes_in_flight, inflight, largest_sent, largest_acked,
                         recovery_start, in_recovery, credit, carry, reduction_due, lost_since_update,
                         pto_count, app_limited, cause, reductions>>
          /\ Step("OnPacketsAcked")

\* harness/model/tracefile.py writes one after each ACK's records: the end of A.7's
\* OnAckReceived. A step of the state only when it resets a backoff.
IsAckEnd ==
    /\ E.k = "ackend"
    /\ IF ack_pending
       THEN OnAckProcessed /\ IF pto_count > 0 THEN Step("OnAckProcessed") ELSE TRUE
       ELSE UNCHANGED vars

IsApp == E.k = "app" /\ SetAppLimited(E.el) /\ Step("SetAppLimited")

IsOther == E.k = "other" /\ UNCHANGED vars

NormalNext ==
    \/ (IsSent \/ IsAcked \/ IsLost \/ IsPto \/ IsEcn \/ IsApp \/ IsAckOnly \/ IsAckEnd \/ IsOther)
       /\ UNCHANGED ssth_choice
    \/ IsWindow \/ IsSsthresh

\* Deviations of a kind already reported (TraceTolerate, written by
\* harness/model/validate.py once it has reported one) are taken as a resumed
\* validation takes them (validate.Mismatch.resume: the logged window or ssthresh
\* adopted, any other record passed over) and printed, without stopping: one TLC
\* run walks on to the next deviation of a new kind. A sender that grows its window
\* at every ACK of an application-limited stretch deviates at every ACK; stopping at
\* each cost two TLC runs, and stopping for good after a few left the rest of the
\* trace unjudged. Taken only where no step of the spec explains the record.
WindowDeviation ==
    IF E.cwnd > congestion_window
    THEN IF in_recovery THEN "window-growth-in-recovery"
         ELSE IF app_limited THEN "window-growth-while-app-limited" ELSE "window-growth-too-fast"
    ELSE IF reduction_due \/ lost_since_update THEN "reduction-out-of-bounds"
         ELSE IF in_recovery THEN "reduction-in-recovery" ELSE "reduction-without-loss"

ToleratedWindow ==
    /\ E.k = "cwnd" /\ E.cwnd # congestion_window
    /\ WindowDeviation \in TraceTolerate
    /\ congestion_window' = E.cwnd /\ credit' = 0 /\ carry' = 0 /\ lost_since_update' = FALSE
    /\ reduction_due' = (reduction_due /\ E.cwnd >= congestion_window)
    /\ UNCHANGED <<ssthresh, bytes_in_flight, inflight, largest_sent, largest_acked, recovery_start,
                   in_recovery, pto_count, ack_pending, app_limited, cause, reductions>>
    /\ ssth_choice' = <<>> /\ tolerated' = E.line
    /\ PrintT(<<"tolerated", E.line, WindowDeviation>>)

ToleratedSsthresh ==
    /\ E.k = "ssthresh"
    /\ tolerated = E.line \/ "ssthresh-unexplained" \in TraceTolerate
    /\ ssthresh' = E.ssth
    /\ UNCHANGED <<congestion_window, bytes_in_flight, inflight, largest_sent, largest_acked, recovery_start,
                   in_recovery, credit, carry, reduction_due, lost_since_update, pto_count, ack_pending,
                   app_limited, cause, reductions>>
    /\ ssth_choice' = <<>> /\ UNCHANGED tolerated
    /\ tolerated # E.line => PrintT(<<"tolerated", E.line, "ssthresh-unexplained">>)

ToleratedOther ==
    /\ E.k \notin {"cwnd", "ssthresh"} /\ E.k \o "-unexplained" \in TraceTolerate
    /\ UNCHANGED <<vars, ssth_choice, tolerated>>
    /\ PrintT(<<"tolerated", E.line, E.k \o "-unexplained">>)

TraceNext ==
    /\ cursor <= Len(TraceLog)
    /\ \/ NormalNext /\ UNCHANGED tolerated
       \/ /\ TraceTolerate # {} /\ ~ENABLED NormalNext
          /\ ToleratedWindow \/ ToleratedSsthresh \/ ToleratedOther
    /\ cursor' = cursor + 1

TraceSpec == TraceInit /\ [][TraceNext]_<<vars, cursor, ssth_choice, tolerated>>

\* Mismatch report: when TraceStuckAt names the record no step could take, print
\* the model state before it, the spec's actions enabled for that record (window
\* values left free) and the windows the relations allow; then stop.
Diagnose ==
    cursor = TraceStuckAt =>
        /\ PrintT(<<"state", CcState, [congestion_window |-> congestion_window, ssthresh |-> ssthresh,
                    bytes_in_flight |-> bytes_in_flight, largest_sent |-> largest_sent,
                    largest_acked |-> largest_acked, recovery_start |-> recovery_start,
                    in_recovery |-> in_recovery, credit |-> credit, reduction_due |-> reduction_due,
                    lost_since_update |-> lost_since_update, pto_count |-> pto_count, ack_pending |-> ack_pending,
                    reductions |-> reductions, cause |-> cause, inflight |-> inflight,
                    carry |-> carry, app_limited |-> app_limited]>>)
        /\ PrintT(<<"enabled", [OnPacketSent |-> ENABLED OnPacketSent(E.pn, E.size, E.el),
                    OnPacketsAcked |-> ENABLED OnPacketsAcked(E.pn, E.size),
                    OnPacketsLost |-> ENABLED OnPacketsLost(E.pn, E.size),
                    OnProbeLoss |-> ENABLED OnProbeLoss(E.pn, E.size),
                    OnPtoExpired |-> ENABLED OnPtoExpired, OnEcnCe |-> ENABLED OnEcnCe,
                    OnAckProcessed |-> ENABLED OnAckProcessed,
                    GrowWindow |-> ENABLED GrowWindow, ReduceWindow |-> ENABLED ReduceWindow,
                    OnPersistentCongestion |-> ENABLED OnPersistentCongestion,
                    OnSlowStartExit |-> ENABLED OnSlowStartExit(E.ssth),
                    SetAppLimited |-> ENABLED SetAppLimited(E.el)]>>)
        /\ PrintT(<<"bounds", [grow_max |-> GrowthBound, reduce_min |-> ReductionLow,
                    reduce_max |-> ReductionHigh, collapse_max |-> CollapseHigh]>>)
        /\ FALSE
=============================================================================
