------------------------- MODULE CongestionControl -------------------------
(***************************************************************************)
(* Congestion control and loss recovery of one QUIC sender, RFC 9002 §6-7  *)
(* and Appendix B, with the CUBIC window bounds of RFC 9438 §4.            *)
(*                                                                         *)
(* What is modelled: one packet-number space (application data), packets  *)
(* by packet number, the congestion window, ssthresh, bytes in flight, the *)
(* recovery period (by the largest packet number sent when it began: pn    *)
(* order is send order, so "sent_time <= congestion_recovery_start_time"  *)
(* of RFC 9002 B.6 becomes "pn <= recovery_start"), pto_count, and an      *)
(* app_limited flag.                                                       *)
(*                                                                         *)
(* Abstracted away: time (RTT estimation, the loss and PTO timers, the     *)
(* persistent-congestion duration of §7.6.1: a loss may be followed by the *)
(* collapse, the ground-truth property checks the duration), pacing, the   *)
(* Initial and Handshake spaces, ACK frames (one acknowledgement per       *)
(* packet), ECN counts (one CE signal), and exact arithmetic.              *)
(*                                                                         *)
(* Windows are relations, not formulas: stacks round differently and CUBIC *)
(* takes cube roots, so each new window lies in a range of width          *)
(* Tolerance (one datagram when checking traces) around the RFC's value:  *)
(*   - a reduction lands in [β·cwnd − Tolerance, β·cwnd + Tolerance],      *)
(*     never below kMinimumWindow (§7.3.2; RFC 9438 §4.6 also allows        *)
(*     β·bytes_in_flight for CUBIC);                                       *)
(*   - growth in slow start is at most the bytes acknowledged (§7.3.1);    *)
(*   - growth in congestion avoidance is at most one datagram per window   *)
(*     of acknowledged bytes for NewReno (§7.3.3), at most half the        *)
(*     acknowledged bytes for CUBIC (its target is at most 1.5·cwnd per    *)
(*     round trip, RFC 9438 §4.2), plus Tolerance; CUBIC's may also dip by  *)
(*     less than Tolerance when it switches to W_est (RFC 9438 §4.3).      *)
(* Stacks apply and log a window change at their own moment (after a whole *)
(* ACK frame, or at the next ACK), so an event's bookkeeping and the       *)
(* window change it licenses are separate steps: an acknowledgement adds   *)
(* credit, a loss makes a reduction due, and GrowWindow / ReduceWindow /   *)
(* OnPersistentCongestion move the window later, within the relations.     *)
(*                                                                         *)
(* The states of Kakhki et al. (IMC'17), mapped onto RFC 9002 (CcState):   *)
(*   Init                   nothing sent yet                               *)
(*   SlowStart              cwnd < ssthresh (§7.3.1)                       *)
(*   CongestionAvoidance    cwnd >= ssthresh (§7.3.3)                      *)
(*   CongestionAvoidanceMaxed  the window at its cap MaxWindow (a          *)
(*                          configured maximum or a flow-control limit)    *)
(*   ApplicationLimited     app_limited (§7.8)                             *)
(*   Recovery               in a recovery period (§7.3.2)                  *)
(*   TailLossProbe          one PTO has expired, pto_count = 1 (§6.2)      *)
(*   RetransmissionTimeout  pto_count >= 2; with persistent congestion     *)
(*                          (§7.6) the window collapses to kMinimumWindow  *)
(*                                                                         *)
(* Ambiguities of the RFC, and the reading taken here:                     *)
(*   - §6.2.1 resets pto_count on an acknowledgement; a client without a   *)
(*     validated handshake keeps it. Here: every ACK that newly            *)
(*     acknowledges a packet in flight, once it is processed: A.7's        *)
(*     OnAckReceived declares the losses it reveals and grows or cuts the  *)
(*     window first (OnAckProcessed), so a sender may declare losses and   *)
(*     reduce its window while still in TailLossProbe.                     *)
(*   - §7.3.2 ends recovery when "a packet sent during the recovery period *)
(*     is acknowledged"; B.6 compares send times only. Here both: a newly  *)
(*     acknowledged pn > recovery_start ends the period.                   *)
(*   - A stack may declare a packet lost on PTO expiry (aioquic does); RFC *)
(*     9002 §6.1 only declares packets sent before an acknowledged one.    *)
(*     Such a loss (pn above the largest acknowledged) is OnProbeLoss and  *)
(*     carries no congestion signal.                                       *)
(***************************************************************************)
EXTENDS Integers, FiniteSets

CONSTANTS
    MaxDatagramSize,  \* bytes; max_datagram_size (§7.2)
    InitialWindows,   \* set of allowed initial windows, bytes (§7.2 recommends 10 datagrams)
    Tolerance,        \* bytes by which a new window may miss the RFC's value
    Algorithm,        \* "newreno" or "cubic"
    MaxWindow,        \* the window's cap in bytes (Infinity if none)
    Infinity          \* an ssthresh that was never set; above any window

ASSUME Algorithm \in {"newreno", "cubic"}

kMinimumWindow == 2 * MaxDatagramSize                     \* §7.2
\* kLossReductionFactor as a fraction: §7.3.2 (NewReno), RFC 9438 §4.6 (CUBIC).
BetaNum == IF Algorithm = "cubic" THEN 7 ELSE 1
BetaDen == IF Algorithm = "cubic" THEN 10 ELSE 2
NoPn == -1

VARIABLES
    congestion_window, \* bytes
    ssthresh,          \* bytes, or Infinity
    bytes_in_flight,   \* bytes of ack-eliciting packets sent, not yet acked or lost
    inflight,          \* their packet numbers
    largest_sent,      \* pn, NoPn before the first packet
    largest_acked,     \* pn, NoPn before the first acknowledgement
    recovery_start,    \* largest pn sent when the current recovery period began (B.6); NoPn: none
    in_recovery,       \* TRUE from a congestion event until a packet sent after it is acked
    credit,            \* bytes newly acked outside recovery since the window last moved
    carry,             \* bytes of growth a reduction left owed (see ReduceWindow)
    reduction_due,     \* a congestion event happened and its reduction is not yet applied
    lost_since_update, \* a loss was declared since the window last moved
    pto_count,         \* §6.2.1
    ack_pending,       \* an ACK newly acknowledged a packet in flight and is still being processed (A.7)
    app_limited,       \* §7.8
    cause,             \* history: what started the current period: "none", "loss", "ecn", "persistent"
    reductions         \* history: window reductions in the current recovery period

vars == <<congestion_window, ssthresh, bytes_in_flight, inflight, largest_sent, largest_acked,
          recovery_start, in_recovery, credit, carry, reduction_due, lost_since_update, pto_count,
          ack_pending, app_limited, cause, reductions>>

Min(a, b) == IF a < b THEN a ELSE b
Max(a, b) == IF a > b THEN a ELSE b

CcState ==
    IF largest_sent = NoPn THEN "Init"
    ELSE IF pto_count >= 2 THEN "RetransmissionTimeout"
    ELSE IF pto_count = 1 THEN "TailLossProbe"
    ELSE IF in_recovery THEN "Recovery"
    ELSE IF app_limited THEN "ApplicationLimited"
    ELSE IF congestion_window < ssthresh THEN "SlowStart"
    ELSE IF congestion_window >= MaxWindow THEN "CongestionAvoidanceMaxed"
    ELSE "CongestionAvoidance"

(* The relations. *)
GrowthBound ==                                       \* largest allowed new window
    Min(MaxWindow,
        carry + Tolerance +
        IF congestion_window < ssthresh THEN congestion_window + credit                      \* §7.3.1
        ELSE IF Algorithm = "cubic" THEN congestion_window + credit \div 2                   \* RFC 9438 §4.2
        ELSE congestion_window + (MaxDatagramSize * credit) \div congestion_window)          \* §7.3.3
\* Growth never lowers the window, but for one case: RFC 9438 §4.3 sets CUBIC's
\* window to W_est in the Reno-friendly region, and §4.4 grows it in the concave
\* region toward W_cubic(t + RTT), which may pass W_est; the switch then lowers the
\* window by less than a datagram with no congestion event (aioquic: 7125 → 6990 B).
GrowthLow ==
    IF Algorithm = "cubic" /\ congestion_window >= ssthresh
    THEN Max(kMinimumWindow, congestion_window - Tolerance) ELSE congestion_window
ReductionTarget(w) == Max(kMinimumWindow, (w * BetaNum) \div BetaDen)
ReductionLow ==
    Max(kMinimumWindow,
        IF Algorithm = "cubic" THEN Min(ReductionTarget(congestion_window), ReductionTarget(bytes_in_flight)) - Tolerance
        ELSE ReductionTarget(congestion_window) - Tolerance)
\* A reduction never raises the window, whatever the tolerance. The ACK that brings
\* the loss may first grow the window by its credit, unlogged (quinn), and the cut
\* applies to that: β·(window + credit) at most.
ReductionHigh == Min(congestion_window, ReductionTarget(congestion_window + credit) + Tolerance)
CollapseHigh == kMinimumWindow + Tolerance

TypeOK ==
    /\ congestion_window \in Nat
    /\ ssthresh \in Nat \cup {Infinity}
    /\ bytes_in_flight \in Nat
    /\ inflight \subseteq Nat
    /\ largest_sent \in Int /\ largest_acked \in Int /\ recovery_start \in Int
    /\ largest_acked <= largest_sent /\ recovery_start <= largest_sent
    /\ in_recovery \in BOOLEAN /\ reduction_due \in BOOLEAN /\ lost_since_update \in BOOLEAN
    /\ credit \in Nat /\ carry \in Nat /\ pto_count \in Nat /\ app_limited \in BOOLEAN
    /\ ack_pending \in BOOLEAN
    /\ cause \in {"none", "loss", "ecn", "persistent"} /\ reductions \in Nat

Init ==
    /\ congestion_window \in InitialWindows
    /\ ssthresh = Infinity                    \* B.3
    /\ bytes_in_flight = 0 /\ inflight = {}
    /\ largest_sent = NoPn /\ largest_acked = NoPn
    /\ recovery_start = NoPn /\ in_recovery = FALSE
    /\ credit = 0 /\ carry = 0 /\ reduction_due = FALSE /\ lost_since_update = FALSE
    /\ pto_count = 0 /\ ack_pending = FALSE /\ app_limited = FALSE
    /\ cause = "none" /\ reductions = 0

\* B.4. The spec does not say when a packet may be sent: pacing and probes
\* differ by stack. Next sends only within the window (CanSend).
OnPacketSent(pn, size, eliciting) ==
    /\ ~ack_pending            \* an ACK is processed whole before the next send (A.7)
    /\ pn > largest_sent
    /\ largest_sent' = pn
    /\ IF eliciting
       THEN /\ inflight' = inflight \cup {pn}
            /\ bytes_in_flight' = bytes_in_flight + size
       ELSE UNCHANGED <<inflight, bytes_in_flight>>
    /\ UNCHANGED <<congestion_window, ssthresh, largest_acked, recovery_start, in_recovery, credit, carry,
                   reduction_due, lost_since_update, pto_count, ack_pending, app_limited, cause, reductions>>

CanSend(size) == bytes_in_flight + size <= congestion_window    \* §7

\* B.5 (bookkeeping; the growth it licenses is GrowWindow). An acknowledgement of
\* a packet no longer in flight (declared lost before) changes nothing but largest_acked.
\* The PTO backoff is reset once the whole ACK is processed (OnAckProcessed).
OnPacketsAcked(pn, size) ==
    /\ pn <= largest_sent
    /\ largest_acked' = Max(largest_acked, pn)
    /\ IF pn \in inflight
       THEN /\ inflight' = inflight \ {pn}
            /\ bytes_in_flight' = bytes_in_flight - size
            \* B.5: no growth for packets sent in a recovery period, nor while app-limited (§7.8).
            /\ credit' = IF pn <= recovery_start \/ app_limited THEN credit ELSE credit + size
            /\ carry' = carry
            /\ in_recovery' = (in_recovery /\ pn <= recovery_start)      \* §7.3.2
            /\ ack_pending' = TRUE                                       \* §6.2.1, A.7
       \* §6.2.1 resets the PTO backoff "when an acknowledgment is received"; B.5 and
       \* A.7 only for packets newly acknowledged in flight. An acknowledgement of a
       \* packet declared lost before (a spurious loss, or one the capture presumed)
       \* may do either.
       ELSE /\ UNCHANGED <<inflight, bytes_in_flight, credit, carry, in_recovery>>
            /\ ack_pending' \in {ack_pending, TRUE}
    /\ UNCHANGED <<congestion_window, ssthresh, largest_sent, recovery_start, reduction_due,
                   lost_since_update, pto_count, app_limited, cause, reductions>>

\* A.7: the end of OnAckReceived, after the ACK's losses and acknowledgements:
\* "pto_count = 0". Until then the sender is still in TailLossProbe or
\* RetransmissionTimeout, so the losses the probe's ACK reveals, and the window's
\* response to them, belong to that state.
OnAckProcessed ==
    /\ ack_pending
    /\ ack_pending' = FALSE /\ pto_count' = 0
    /\ UNCHANGED <<congestion_window, ssthresh, bytes_in_flight, inflight, largest_sent, largest_acked,
                   recovery_start, in_recovery, credit, carry, reduction_due, lost_since_update, app_limited,
                   cause, reductions>>

\* A congestion signal about a packet numbered pn (B.6 OnCongestionEvent, minus the
\* window change, which is ReduceWindow).
CongestionEvent(pn, why) ==
    IF pn > recovery_start
    THEN /\ recovery_start' = largest_sent
         /\ in_recovery' = TRUE
         /\ reduction_due' = TRUE
         /\ cause' = why
         /\ reductions' = 0
    ELSE UNCHANGED <<recovery_start, in_recovery, reduction_due, cause, reductions>>

\* §6.1 (a packet sent before an acknowledged one, by packet or time threshold) and B.8.
\* Lost data is data to send again: a sender whose application had run dry is no
\* longer application limited (§7.8) once it has a loss to repair.
OnPacketsLost(pn, size) ==
    /\ pn \in inflight
    /\ pn < largest_acked
    /\ inflight' = inflight \ {pn}
    /\ bytes_in_flight' = bytes_in_flight - size
    /\ lost_since_update' = TRUE
    /\ CongestionEvent(pn, "loss")
    /\ app_limited' = FALSE
    /\ UNCHANGED <<congestion_window, ssthresh, largest_sent, largest_acked, credit, carry, pto_count, ack_pending>>

\* A packet the stack gave up on at a PTO (above the largest acknowledged): not a
\* congestion signal (see the header); its data is to send again, as for a loss.
OnProbeLoss(pn, size) ==
    /\ pn \in inflight
    /\ pn > largest_acked
    /\ inflight' = inflight \ {pn}
    /\ bytes_in_flight' = bytes_in_flight - size
    /\ app_limited' = FALSE
    /\ UNCHANGED <<congestion_window, ssthresh, largest_sent, largest_acked, recovery_start, in_recovery,
                   credit, carry, reduction_due, lost_since_update, pto_count, ack_pending, cause,
                   reductions>>

\* B.7: an ACK reporting a new ECN-CE count, about the largest acknowledged packet.
OnEcnCe ==
    /\ largest_acked # NoPn
    /\ CongestionEvent(largest_acked, "ecn")
    /\ UNCHANGED <<congestion_window, ssthresh, bytes_in_flight, inflight, largest_sent, largest_acked,
                   credit, carry, lost_since_update, pto_count, ack_pending, app_limited>>

\* §6.2.1: each expiry doubles the PTO period; the window does not change (§7.5).
\* The timer runs from the last ack-eliciting packet sent: none before the first.
\* A probe resends data not yet acknowledged (§6.2.4): not application limited.
OnPtoExpired ==
    /\ largest_sent # NoPn /\ ~ack_pending
    /\ pto_count' = pto_count + 1
    /\ app_limited' = FALSE
    /\ UNCHANGED <<congestion_window, ssthresh, bytes_in_flight, inflight, largest_sent, largest_acked,
                   recovery_start, in_recovery, credit, carry, reduction_due, lost_since_update, ack_pending,
                   cause, reductions>>

\* The window moves up on the credit of acknowledged bytes (B.5). Credit earned
\* before a congestion event may still be applied after it (aioquic logs the growth
\* of an ACK after the loss that ACK revealed); acknowledgements in a recovery period
\* earn none, and the reduction clears it.
GrowWindow ==
    /\ ~app_limited
    /\ credit > 0
    /\ congestion_window' \in GrowthLow .. GrowthBound
    \* In slow start the window grows by the bytes acknowledged (§7.3.1), logged in as
    \* many steps as the stack likes (quinn logs one per ACK frame of a datagram batch
    \* whose frames the capture shows apart): what a step did not use stays owed.
    /\ credit' = IF congestion_window < ssthresh
                 THEN Max(0, credit - (congestion_window' - congestion_window))
                 ELSE 0
    /\ carry' = 0 /\ lost_since_update' = FALSE
    /\ UNCHANGED <<ssthresh, bytes_in_flight, inflight, largest_sent, largest_acked, recovery_start,
                   in_recovery, reduction_due, pto_count, ack_pending, app_limited, cause, reductions>>

\* B.6: the one reduction of a recovery period; ssthresh becomes the new window.
\* B.5 grows by fractions of a datagram; a stack that counts acknowledged bytes and
\* adds whole datagrams (aioquic's NewReno) carries its unspent count, worth up to
\* one datagram more at the smaller window, over the reduction: carry, spent once.
ReduceWindow ==
    /\ reduction_due
    /\ congestion_window' \in ReductionLow .. ReductionHigh
    /\ ssthresh' = congestion_window'
    /\ reduction_due' = FALSE /\ credit' = 0 /\ lost_since_update' = FALSE
    /\ carry' = MaxDatagramSize
    /\ reductions' = reductions + 1
    /\ UNCHANGED <<bytes_in_flight, inflight, largest_sent, largest_acked, recovery_start, in_recovery,
                   pto_count, ack_pending, app_limited, cause>>

\* §7.6.2 (B.8): after losses spanning the persistent congestion duration, the window
\* collapses to kMinimumWindow and the recovery period is forgotten. A due reduction
\* still sets ssthresh, as B.8 calls OnCongestionEvent first, to what ReduceWindow
\* would have set: for CUBIC that includes RFC 9438 §4.6's beta times the flight
\* (quinn logs 0.7 x the bytes in flight when the losses were declared).
OnPersistentCongestion ==
    /\ lost_since_update
    /\ congestion_window' \in kMinimumWindow .. Min(congestion_window, CollapseHigh)
    /\ ssthresh' \in IF reduction_due THEN ReductionLow .. ReductionHigh ELSE {ssthresh}
    /\ recovery_start' = NoPn /\ in_recovery' = FALSE
    /\ reduction_due' = FALSE /\ credit' = 0 /\ carry' = 0 /\ lost_since_update' = FALSE
    /\ cause' = "persistent"
    /\ reductions' = 0
    /\ UNCHANGED <<bytes_in_flight, inflight, largest_sent, largest_acked, pto_count, ack_pending, app_limited>>

\* RFC 9406 (HyStart++): slow start may end without a loss; ssthresh takes the window.
\* It decides on round trips, so not before the first packet (B.3: ssthresh starts infinite).
OnSlowStartExit(new_ssthresh) ==
    /\ largest_sent # NoPn
    /\ ssthresh = Infinity /\ ~in_recovery
    /\ ssthresh' = new_ssthresh
    /\ UNCHANGED <<congestion_window, bytes_in_flight, inflight, largest_sent, largest_acked,
                   recovery_start, in_recovery, credit, carry, reduction_due, lost_since_update, pto_count,
                   ack_pending, app_limited, cause, reductions>>

\* §7.8: the sender stops or resumes using its whole window.
SetAppLimited(b) ==
    /\ app_limited # b
    /\ app_limited' = b
    /\ UNCHANGED <<congestion_window, ssthresh, bytes_in_flight, inflight, largest_sent, largest_acked,
                   recovery_start, in_recovery, credit, carry, reduction_due, lost_since_update, pto_count,
                   ack_pending, cause, reductions>>

Next ==
    \/ CanSend(MaxDatagramSize) /\ OnPacketSent(largest_sent + 1, MaxDatagramSize, TRUE)
    \/ \E pn \in inflight : OnPacketsAcked(pn, MaxDatagramSize) \/ OnPacketsLost(pn, MaxDatagramSize)
                            \/ OnProbeLoss(pn, MaxDatagramSize)
    \/ OnEcnCe
    \/ OnAckProcessed
    \/ OnPtoExpired
    \/ GrowWindow
    \/ ReduceWindow
    \/ OnPersistentCongestion
    \/ OnSlowStartExit(congestion_window)
    \/ \E b \in BOOLEAN : SetAppLimited(b)

Spec == Init /\ [][Next]_vars

(* Invariants, each with its section. *)
CwndAtLeastMinimum == congestion_window >= kMinimumWindow                       \* §7.2
OneReductionPerRecoveryPeriod == reductions <= 1                                \* §7.3.2
RecoveryOnlyAfterLossOrEcn == in_recovery => cause \in {"loss", "ecn"}          \* §7.3.2, B.6
\* B.6: after the reduction of a period, ssthresh is the window it reduced to, and
\* the window stays there until the period ends.
SsthreshSetOnReduction ==
    (in_recovery /\ reductions = 1) => ssthresh = congestion_window
BytesInFlightConsistent == bytes_in_flight = MaxDatagramSize * Cardinality(inflight) \* B.2 (Next sends full datagrams)

(* Properties of steps. *)
NoGrowthWhileAppLimited == [][app_limited => congestion_window' <= congestion_window]_vars  \* §7.8
\* §7.3.2: once a period's reduction is applied, the window does not grow until it ends.
NoGrowthInRecovery == [][in_recovery /\ in_recovery' /\ reductions = 1 => congestion_window' <= congestion_window]_vars
\* §6.2.1: pto_count only ever rises by one (one expiry) or returns to 0 on an acknowledgement.
PtoBackoff == [][pto_count' \in {pto_count, pto_count + 1} \/ (pto_count' = 0 /\ largest_acked' # NoPn)]_vars

(* Liveness: a recovery period ends once a packet sent after it began is acked.
   Needs fairness: the sender keeps sending while the window allows (WF on sending),
   the reduction is applied (WF on ReduceWindow), and every packet in flight is
   eventually acknowledged or declared lost (WF on their fates). With finitely
   many packet numbers (the model's bound), "eventually" may also be running out
   of them. *)
Fates == \E pn \in inflight : OnPacketsAcked(pn, MaxDatagramSize) \/ OnPacketsLost(pn, MaxDatagramSize)
                              \/ OnProbeLoss(pn, MaxDatagramSize)
Send == CanSend(MaxDatagramSize) /\ OnPacketSent(largest_sent + 1, MaxDatagramSize, TRUE)
=============================================================================
