------------------------------ MODULE MCTrap ------------------------------
(* Trap properties for directed generation (harness/model/traps.py): the    *)
(* invariant NotReached says the transition TrapFrom -TrapAction-> TrapTo  *)
(* never fires in the bounded model of MCCongestionControl. TLC refutes it *)
(* breadth-first, so its counterexample is a shortest abstract path to that *)
(* transition: `last` names each step's action and packet number (for     *)
(* SetAppLimited, 1 to set and 0 to clear), which                        *)
(* harness/schedule/directed.py turns into link actions.                   *)
EXTENDS MCCongestionControl

CONSTANTS TrapFrom, TrapAction, TrapTo,
          TrapAvoid,       \* actions the path may not take on its way (those no schedule can bring about)
          TrapAvoidStates  \* states it may not pass through (those only some stacks can reach)

VARIABLE last   \* the step just taken: its states, action and packet number (NoPn: none)

Took(name, pn) == last' = [from |-> CcState, action |-> name, to |-> CcState', pn |-> pn]

TrapInit == Init /\ last = [from |-> "none", action |-> "none", to |-> "none", pn |-> NoPn]

TrapNext ==
    /\ \/ Send /\ Took("OnPacketSent", largest_sent + 1)
       \/ \E pn \in inflight : \/ OnPacketsAcked(pn, MaxDatagramSize) /\ Took("OnPacketsAcked", pn)
                               \/ OnPacketsLost(pn, MaxDatagramSize) /\ Took("OnPacketsLost", pn)
                               \/ OnProbeLoss(pn, MaxDatagramSize) /\ Took("OnProbeLoss", pn)
       \/ OnEcnCe /\ Took("OnEcnCe", largest_acked)
       \/ OnAckProcessed /\ Took("OnAckProcessed", NoPn)
       \/ OnPtoExpired /\ Took("OnPtoExpired", NoPn)
       \/ GrowWindow /\ Took("GrowWindow", NoPn)
       \/ ReduceWindow /\ Took("ReduceWindow", NoPn)
       \/ OnPersistentCongestion /\ Took("OnPersistentCongestion", NoPn)
       \/ OnSlowStartExit(congestion_window) /\ Took("OnSlowStartExit", NoPn)
       \/ \E b \in BOOLEAN : SetAppLimited(b) /\ Took("SetAppLimited", IF b THEN 1 ELSE 0)
    /\ largest_sent' <= MaxPn /\ pto_count' <= MaxPto
    /\ last'.action \notin TrapAvoid \/ last'.action = TrapAction
    /\ last'.to \notin TrapAvoidStates

NotReached == ~(last.from = TrapFrom /\ last.action = TrapAction /\ last.to = TrapTo)
=============================================================================
