------------------------- MODULE MCTransitions -------------------------
(* The model's abstract transitions for coverage: every (CcState, action,   *)
(* CcState') that the bounded model reaches, printed once each. Same bounds *)
(* as MCCongestionControl (its .cfg is shared), safety only, so it is fast. *)
EXTENDS MCCongestionControl, Sequences

\* TLC register 1 holds the transitions printed so far (one worker: no races).
Edge(name) ==
    LET e == <<CcState, name, CcState'>>
    IN  IF e \in TLCGet(1) THEN TRUE ELSE PrintT(<<"edge">> \o e) /\ TLCSet(1, TLCGet(1) \cup {e})

LabelledNext ==
    /\ \/ Send /\ Edge("OnPacketSent")
       \/ \E pn \in inflight : \/ OnPacketsAcked(pn, MaxDatagramSize) /\ Edge("OnPacketsAcked")
                               \/ OnPacketsLost(pn, MaxDatagramSize) /\ Edge("OnPacketsLost")
                               \/ OnProbeLoss(pn, MaxDatagramSize) /\ Edge("OnProbeLoss")
       \/ OnEcnCe /\ Edge("OnEcnCe")
       \/ OnAckProcessed /\ (IF pto_count > 0 THEN Edge("OnAckProcessed") ELSE TRUE)  \* else no state changes
       \/ OnPtoExpired /\ Edge("OnPtoExpired")
       \/ GrowWindow /\ Edge("GrowWindow")
       \/ ReduceWindow /\ Edge("ReduceWindow")
       \/ OnPersistentCongestion /\ Edge("OnPersistentCongestion")
       \/ OnSlowStartExit(congestion_window) /\ Edge("OnSlowStartExit")
       \/ \E b \in BOOLEAN : SetAppLimited(b) /\ Edge("SetAppLimited")
    /\ largest_sent' <= MaxPn /\ pto_count' <= MaxPto

LabelledInit == Init /\ TLCSet(1, {})
=============================================================================
