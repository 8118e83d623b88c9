// Package timespec parses and evaluates the time description of a demand,
// the JSON of seed 003 (time-aware resource requests for YARN):
//
//	{
//	  "DemandID": "1234",
//	  "OrderBy":  "1200",
//	  "Duration": {"Time": [null, "+20m"], "Strategy": "loose"}
//	}
//
// A description has a DemandID and up to four conditions: Start (when the
// resources should be handed over), Duration (how long they are expected to
// be held), Deadline (when the work on them must be done) and OrderBy (the
// demands that must FINISH first). A time condition is
// {"Time": EXPR, "Strategy": "strict" | "loose"}; Strategy may be left out
// and then means loose. EXPR is an interval [T1, T2] or a logical
// combination {"AND": [EXPR, ...]}, {"OR": [EXPR, ...]}, {"NOT": EXPR}.
//
//	T1: "NOW" | absolute | null
//	T2: absolute | "+N{s,m,h}" (relative to T1, or to NOW when T1 is open)
//	    | "^N" (N allocation opportunities may pass: delay scheduling) | null
//	absolute: "YYYY-MM-DD hh:mm:ss", "YY-MM-DD hh:mm:ss" (20YY), both UTC
//	          unless followed by a zone: an offset ("+01:00", "+0100",
//	          "Z") or a time zone name as TZ takes it ("Europe/Paris");
//	          or RFC 3339 with a zone
//
// An open end (null, or "") is unbounded; [null, null] and [] put no
// condition on time at all. OrderBy is a DemandID, a list of DemandIDs (all
// must finish) or {"AND": [...]}/{"OR": [...]} over them.
//
// Errors name the field and the offending text, e.g.
// `Start.Time[1]: "+5x": unit "x" is not s, m or h`, and wrap ErrInvalid.
// Parsing is pure: NOW and relative times are resolved only when a
// description is evaluated against a reference time (Expr.Holds), or
// turned into the spans of time it allows (Windows, for the planner).
package timespec
