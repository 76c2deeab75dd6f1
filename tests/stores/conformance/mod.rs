//! Admission scenarios every store must pass, written against `dyn Store` and
//! a driven clock. Each store's test file runs them all with its own harness.

use std::sync::Arc;

use waitroom::store::{PassTakenBack, Store, StoreExt};
use waitroom::words::clock::ManualClock;
use waitroom::words::{ConfigPatch, PlaceState, RoomConfig, RoomId, VisitorId};

pub const TICK_MS: u64 = 5_000;

pub struct Harness {
    pub store: Arc<dyn Store>,
    pub sale: Arc<dyn waitroom::store::SaleStore>,
    pub clock: ManualClock,
    /// Whatever must live as long as the store (a private redis-server).
    pub _backing: Option<Box<dyn std::any::Any + Send>>,
}

impl Harness {
    /// A room admitting `per_tick` every 5 s, otherwise defaults.
    pub async fn room(&self, id: &str, per_tick: u32, cap: Option<u64>) -> RoomId {
        let id = RoomId::parse(id).unwrap();
        let mut config = RoomConfig::new("Test room", "https://shop.example/buy");
        config.admit_per_tick = per_tick;
        config.tick_ms = TICK_MS;
        config.max_active = cap;
        self.store.create_room(id.clone(), config).await.unwrap();
        id
    }

    pub async fn join(&self, room: &RoomId) -> (VisitorId, PlaceState) {
        let visitor = VisitorId::random();
        let place = self.store.join(room, visitor).await.unwrap();
        (visitor, place.state)
    }

    pub async fn state(&self, room: &RoomId, visitor: VisitorId) -> PlaceState {
        self.store.status(room, visitor).await.unwrap().state
    }

    /// Advances one tick period and runs the tick.
    pub async fn tick(&self, room: &RoomId) -> u64 {
        self.clock.advance_ms(TICK_MS);
        self.store
            .tick(room)
            .await
            .unwrap()
            .ran
            .expect("a tick is due")
            .admitted
    }

    /// A verify of the visitor's pass, as `/api/verify` makes it: the
    /// pass's `exp` is that of the admission they hold now (0 for none).
    pub async fn arrive(&self, room: &RoomId, visitor: VisitorId) -> PlaceState {
        let exp = match self.state(room, visitor).await {
            PlaceState::Admitted { expires_at, .. } => expires_at / 1000,
            _ => 0,
        };
        self.store.arrive(room, visitor, exp).await.unwrap().state
    }

    pub async fn patch(&self, room: &RoomId, json: &str) {
        let patch: ConfigPatch = serde_json::from_str(json).unwrap();
        self.store.configure(room, patch).await.unwrap();
    }
}

pub fn position(state: PlaceState) -> u64 {
    match state {
        PlaceState::Waiting { position, .. } => position,
        other => panic!("expected waiting, got {other:?}"),
    }
}

pub fn is_admitted(state: PlaceState) -> bool {
    matches!(state, PlaceState::Admitted { .. })
}

/// Runs every scenario against stores built by `make`.
#[macro_export]
macro_rules! conformance_suite {
    ($make:expr) => {
        $crate::conformance_suite!(@tests $make;
            bucket_starts_full_and_passes_arrivals_through,
            arrivals_queue_once_someone_waits,
            each_tick_admits_at_most_the_rate_in_join_order,
            tokens_never_accumulate_beyond_one_tick,
            tick_is_idempotent_for_a_given_time,
            tick_says_when_the_next_is_due_and_whether_anyone_needs_it,
            every_tick_answer_carries_the_last_minutes_admissions,
            cap_holds_admission_until_passes_expire,
            leaving_with_a_pass_frees_its_slot,
            join_is_idempotent,
            reentry_after_admission_or_leave_goes_to_the_back,
            absent_visitors_lose_their_place_and_burn_no_admission,
            a_new_place_counts_from_its_joining_whatever_marked_its_visitor_before,
            a_visitor_away_too_long_is_told_so_and_rejoins_at_the_back,
            present_visitors_keep_their_place,
            paused_rooms_admit_nobody,
            eta_follows_the_achieved_rate,
            after_a_rate_change_the_eta_uses_the_new_rate_until_a_window_of_it,
            positions_count_only_those_still_ahead,
            closed_rooms_tell_visitors_and_refuse_joins,
            unknown_rooms_are_errors,
            join_limits_hold_per_address_on_a_driven_clock,
            wrong_logins_lock_a_block_out_on_a_driven_clock,
            revoking_a_pass_frees_its_slot_at_once,
            passes_never_seen_are_reclaimed_as_no_shows,
            resumed_arrivals_get_a_whole_grace_once_per_outage,
            a_known_user_holds_one_place_from_any_device,
            a_fresh_visitor_is_answered_as_any_new_one,
            user_required_refuses_anonymous_joins,
            proof_of_work_is_asked_of_new_places_and_each_solution_counts_once,
            a_solution_easier_than_the_room_asks_now_is_refused,
            a_notice_reaches_every_place_and_the_event_of_its_change,
            a_rooms_language_is_kept_as_its_code_and_a_bad_one_changes_nothing,
            a_room_keeps_its_page_branding_field_by_field,
            reject_turns_new_arrivals_away_and_keeps_the_line,
            closes_at_turns_away_arrivals_after_it,
            passthrough_admits_every_arrival_and_then_the_line,
            random_admits_anyone_waiting_not_the_head,
            places_read_many_as_status_reads_each,
            every_config_change_is_in_force_at_once_up_and_down,
            those_who_left_are_told_so_then_forgotten,
            a_room_made_again_remembers_nothing_of_its_predecessors_visitors,
            a_mass_lapse_is_swept_a_slice_at_a_time,
            a_lapse_of_the_seen_and_the_never_seen_is_swept_a_slice_at_a_time,
            passes_never_seen_are_reclaimed_a_slice_at_a_time,
            a_mass_expiry_is_swept_a_slice_at_a_time_and_told_at_once,
            a_large_admission_goes_a_slice_per_call,
            a_resumption_over_many_passes_is_one_step_and_loses_none,
            bypass_networks_are_let_in_at_once_outside_the_cap,
            bypass_networks_wait_for_nothing_but_closes_at,
            joins_made_at_once_are_each_answered_as_if_alone,
        );
        $crate::conformance_suite!(@draw $make;
            before_the_opening_everyone_waits_unordered_and_nobody_is_admitted,
            the_opening_reveals_the_order_fixed_at_each_join,
            the_draw_lists_every_entrant_in_drawn_order,
            an_opening_stays_once_passed_and_draws_even_while_paused,
            a_room_whose_line_holds_people_gets_no_opening,
            silent_entrants_leave_the_pre_queue,
            the_tick_says_to_come_back_at_the_opening,
            an_empty_pre_queue_is_told_to_come_back_at_the_opening,
            places_tell_the_drawn_positions,
        );
        $crate::conformance_suite!(@sale $make;
            stock_is_claimed_exactly,
            the_per_user_limit_counts_held_and_confirmed_units,
            a_repeated_idempotency_key_returns_the_first_claim,
            seat_claims_are_all_or_nothing,
            claims_for_what_is_not_for_sale_are_refused,
            unconfirmed_holds_return_to_stock_by_themselves,
            confirming_makes_orders_in_confirmation_order,
            releasing_gives_back_and_only_the_owner_may,
            a_room_created_again_starts_without_its_predecessors_sale,
            a_sold_out_sale_closes_the_line_and_holds_keep_it_open,
            a_known_users_limit_counts_every_visit_and_device,
            a_pass_taken_back_gives_its_holds_back,
            a_mass_expiry_of_holds_is_given_back_a_slice_at_a_time,
            holds_the_sweep_has_not_reached_are_settled_by_what_touches_them,
            a_claim_the_stock_lacks_gives_back_expired_holds_first,
        );
        $crate::conformance_suite!(@codes $make;
            code_holders_are_admitted_first_lower_priority_first,
            a_code_makes_as_many_places_as_its_uses,
            an_unknown_code_is_refused_and_changes_nothing,
            a_removed_group_stops_its_codes_at_once,
            code_required_refuses_joins_without_a_valid_code,
            a_visitor_waiting_in_the_general_line_moves_ahead_with_a_code,
            a_second_device_of_the_same_user_spends_nothing,
            code_holders_before_the_opening_are_drawn_first_lower_priority_first,
            wrong_codes_spend_the_addresss_guesses_and_past_them_no_code_is_looked_at,
        );
        $crate::conformance_suite!(@report $make;
            the_report_counts_a_known_drop_exactly,
            a_pass_given_up_counts_as_left_and_one_taken_back_as_revoked,
            a_closed_rooms_report_is_kept_and_a_room_made_again_starts_its_own,
            a_pre_queue_entrants_wait_runs_from_the_opening,
            rows_are_a_minute_each_from_the_first_tick_to_the_next_rows,
            rows_older_than_a_week_fold_into_hours,
        );
        $crate::conformance_suite!(@sessions $make;
            a_session_lasts_while_its_pass_is_used_and_lapses_once_idle,
            a_renewal_writes_at_most_once_a_tenth_of_the_idle_time,
            an_unused_pass_lapses_from_its_admission_and_a_bypassed_one_too,
            a_shorter_arrival_grace_reclaims_a_no_show_before_it_lapses,
            the_hard_limit_holds_however_active_the_visitor,
            a_lapsed_session_frees_its_slot_and_no_renewal_revives_it,
            another_admissions_pass_renews_nothing,
            sessions_change_live_on_and_off_up_and_down,
            a_lapse_the_sweep_has_not_reached_is_told_all_the_same,
        );
        $crate::conformance_suite!(@schedule $make;
            an_entry_applies_once_at_its_time_and_a_join_just_after_sees_it,
            an_operators_pause_holds_the_schedule_until_they_unpause,
            a_pause_the_schedule_sets_holds_nothing,
            an_entry_that_no_longer_applies_is_skipped_with_its_error,
            a_replaced_list_keeps_what_was_applied_and_a_past_entry_applies_at_once,
            an_entry_that_sets_the_opening_commits_the_draw_when_set,
        );
        $crate::conformance_suite!(@autotune $make;
            a_slow_origin_cuts_the_rate_and_a_healthy_one_raises_it,
            the_rate_never_leaves_its_bounds_and_follows_admit_per_tick,
            a_dry_run_says_what_it_would_do_and_never_changes_the_rate,
            probes_go_to_a_line_at_most_once_a_second,
            the_report_keeps_the_rate_and_its_changes_after_the_close,
        );
        $crate::conformance_suite!(@notify $make;
            a_visitor_who_asked_is_kept_while_away_until_near_then_must_come_back,
            after_near_an_absent_visitor_lapses_at_the_return_time,
            the_turn_comes_as_admitted_and_the_pass_waits_for_the_visitor,
            an_event_is_handed_to_one_consumer_until_settled_or_taken_over,
            what_the_visitor_left_goes_with_the_place,
            only_a_waiting_visitor_asks_and_an_address_holds_a_few,
            a_resume_code_is_spent_once,
        );
        $crate::conformance_suite!(@rooms_file $make;
            a_table_creates_its_room_and_then_changes_nothing,
            an_unchanged_table_leaves_a_live_change_alone,
            a_changed_table_applies_only_the_fields_it_names,
            applies_made_at_once_apply_once,
            a_room_closed_stays_closed_under_its_unchanged_table,
            a_table_the_room_cannot_take_changes_nothing,
            a_changed_table_keeps_what_its_schedule_applied,
        );
    };
    (@report $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let harness: $crate::conformance::Harness = $make().await;
                $crate::conformance::report::$name(&harness).await;
            }
        )*
    };
    (@sessions $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let harness: $crate::conformance::Harness = $make().await;
                $crate::conformance::sessions::$name(&harness).await;
            }
        )*
    };
    (@schedule $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let harness: $crate::conformance::Harness = $make().await;
                $crate::conformance::schedule::$name(&harness).await;
            }
        )*
    };
    (@notify $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let harness: $crate::conformance::Harness = $make().await;
                $crate::conformance::notify::$name(&harness).await;
            }
        )*
    };
    (@autotune $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let harness: $crate::conformance::Harness = $make().await;
                $crate::conformance::autotune::$name(&harness).await;
            }
        )*
    };
    (@rooms_file $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let harness: $crate::conformance::Harness = $make().await;
                $crate::conformance::rooms_file::$name(&harness).await;
            }
        )*
    };
    (@codes $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let harness: $crate::conformance::Harness = $make().await;
                $crate::conformance::codes::$name(&harness).await;
            }
        )*
    };
    (@draw $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let harness: $crate::conformance::Harness = $make().await;
                $crate::conformance::draw::$name(&harness).await;
            }
        )*
    };
    (@sale $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let harness: $crate::conformance::Harness = $make().await;
                $crate::conformance::sale::$name(&harness).await;
            }
        )*
    };
    (@tests $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let harness: $crate::conformance::Harness = $make().await;
                $crate::conformance::scenarios::$name(&harness).await;
            }
        )*
    };
}

pub mod autotune;
pub mod codes;
pub mod draw;
pub mod notify;
pub mod report;
pub mod rooms_file;
pub mod sale;
pub mod schedule;
pub mod sessions;

pub mod scenarios {
    use super::*;
    use waitroom::store::{JoinOptions, StoreError};
    use waitroom::words::constants::{SWEEP_AGAIN_MS, SWEEP_SLICE};
    use waitroom::words::join_limit::JoinLimit;
    use waitroom::words::language::Language;
    use waitroom::words::pow::Solved;
    use waitroom::words::{RoomEvent, StoreEvent};

    pub async fn bucket_starts_full_and_passes_arrivals_through(h: &Harness) {
        let room = h.room("r", 3, None).await;
        for _ in 0..3 {
            assert!(
                is_admitted(h.join(&room).await.1),
                "a fresh bucket holds admit_per_tick tokens"
            );
        }
        assert_eq!(
            position(h.join(&room).await.1),
            1,
            "the fourth arrival finds the bucket empty"
        );
    }

    pub async fn arrivals_queue_once_someone_waits(h: &Harness) {
        let room = h.room("r", 2, None).await;
        h.join(&room).await;
        h.join(&room).await;
        let (_, third) = h.join(&room).await;
        assert_eq!(position(third), 1);
        assert_eq!(
            h.tick(&room).await,
            1,
            "the tick refills 2 and spends one on the head"
        );
        // The tick left one token and nobody waits now, so it lets a newcomer through.
        assert!(is_admitted(h.join(&room).await.1));
        let (_, waiting) = h.join(&room).await;
        assert_eq!(position(waiting), 1, "tokens are spent");
    }

    pub async fn each_tick_admits_at_most_the_rate_in_join_order(h: &Harness) {
        let room = h.room("r", 2, None).await;
        h.join(&room).await;
        h.join(&room).await;
        let mut line = Vec::new();
        for expected in 1..=10 {
            let (visitor, state) = h.join(&room).await;
            assert_eq!(position(state), expected);
            line.push(visitor);
        }
        for tick in 0..5 {
            assert_eq!(h.tick(&room).await, 2);
            for (i, visitor) in line.iter().enumerate() {
                let state = h.state(&room, *visitor).await;
                if i < (tick + 1) * 2 {
                    assert!(is_admitted(state), "visitor {i} after tick {tick}");
                } else {
                    assert_eq!(position(state), (i - (tick + 1) * 2 + 1) as u64);
                }
            }
        }
    }

    pub async fn tokens_never_accumulate_beyond_one_tick(h: &Harness) {
        let room = h.room("r", 2, None).await;
        for _ in 0..2 {
            h.join(&room).await;
        }
        // Five idle tick periods, then a crowd: only one tick's worth passes.
        for _ in 0..5 {
            h.tick(&room).await;
        }
        let mut admitted = 0;
        for _ in 0..10 {
            if is_admitted(h.join(&room).await.1) {
                admitted += 1;
            }
        }
        assert_eq!(admitted, 2);
    }

    pub async fn tick_is_idempotent_for_a_given_time(h: &Harness) {
        let room = h.room("r", 1, None).await;
        h.join(&room).await;
        for _ in 0..5 {
            h.join(&room).await;
        }
        h.clock.advance_ms(TICK_MS);
        let first = h.store.tick(&room).await.unwrap();
        let again = h.store.tick(&room).await.unwrap();
        assert_eq!(first.ran.map(|r| r.admitted), Some(1));
        assert_eq!(again.ran, None, "the same instant never ticks twice");
        h.clock.advance_ms(TICK_MS - 1);
        assert_eq!(
            h.store.tick(&room).await.unwrap().ran,
            None,
            "not due before tick_ms"
        );
        h.clock.advance_ms(1);
        assert!(h.store.tick(&room).await.unwrap().ran.is_some());
    }

    /// The promoter sleeps on the tick's answer, so it must say when the
    /// next tick is due and whether anyone needs it.
    pub async fn tick_says_when_the_next_is_due_and_whether_anyone_needs_it(h: &Harness) {
        let room = h.room("r", 1, Some(1)).await;
        h.clock.advance_ms(TICK_MS);
        let empty = h.store.tick(&room).await.unwrap();
        assert_eq!(
            empty.ran, None,
            "an empty room with a full bucket has nothing to do"
        );
        assert!(!empty.busy, "nobody waits and nobody holds a pass");
        assert_eq!(empty.next_due_in_ms, TICK_MS);

        h.join(&room).await; // passes straight through: holds a pass
        let due = h.store.tick(&room).await.unwrap();
        assert!(
            due.ran.is_some() && due.busy,
            "a pass holder: the tick runs"
        );
        assert_eq!(due.next_due_in_ms, TICK_MS);
        h.clock.advance_ms(300);
        let early = h.store.tick(&room).await.unwrap();
        assert_eq!(early.ran, None);
        assert!(early.busy, "a pass holder keeps the room busy");
        assert_eq!(early.next_due_in_ms, TICK_MS - 300);

        h.join(&room).await; // the cap is reached: waits
        h.clock.advance_ms(TICK_MS);
        let late = h.store.tick(&room).await.unwrap();
        assert!(late.ran.is_some() && late.busy);
        assert_eq!(
            late.next_due_in_ms,
            TICK_MS - 300,
            "a late tick keeps the cadence"
        );

        h.store.close_room(&room).await.unwrap();
        assert!(matches!(
            h.store.tick(&room).await,
            Err(StoreError::RoomClosed(_))
        ));
    }

    /// `Tick::figures` feeds each node's history of the room (the admin
    /// chart): every answer, run or not, counts what the room's stats count.
    pub async fn every_tick_answer_carries_the_last_minutes_admissions(h: &Harness) {
        let room = h.room("r", 2, Some(9)).await;
        for _ in 0..5 {
            h.join(&room).await; // two pass through, three wait
        }
        assert_eq!(h.tick(&room).await, 2);
        let stats = h.store.room(&room).await.unwrap().stats;
        assert_eq!(stats.admitted_last_minute, 4);
        h.clock.advance_ms(300);
        let early = h.store.tick(&room).await.unwrap();
        assert_eq!(early.ran, None);
        assert_eq!(
            early.figures.admitted_last_minute, 4,
            "a tick not run counts too"
        );
        assert_eq!(
            (
                early.figures.waiting,
                early.figures.active,
                early.figures.max_active
            ),
            (1, 4, Some(9))
        );
        // Past a minute after the pass-throughs, before one after the tick.
        h.clock.advance_ms(59_000);
        let later = h.store.tick(&room).await.unwrap();
        assert_eq!(
            later.figures.admitted_last_minute,
            h.store
                .room(&room)
                .await
                .unwrap()
                .stats
                .admitted_last_minute
        );
        assert_eq!(
            later.figures.admitted_last_minute, 3,
            "the tick five seconds in admitted two, this one the last"
        );
    }

    pub async fn cap_holds_admission_until_passes_expire(h: &Harness) {
        let room = h.room("r", 10, Some(3)).await;
        h.patch(&room, r#"{"pass_ttl_s": 12}"#).await;
        for _ in 0..3 {
            assert!(is_admitted(h.join(&room).await.1));
        }
        let (waiter, state) = h.join(&room).await;
        assert_eq!(position(state), 1, "the cap stops pass-through");
        assert_eq!(
            h.tick(&room).await,
            0,
            "tokens are there but the cap is reached"
        );
        assert_eq!(h.tick(&room).await, 0);
        // 15 s after admission the 12 s passes have expired by themselves.
        assert_eq!(h.tick(&room).await, 1, "expired passes free their slots");
        assert!(is_admitted(h.state(&room, waiter).await));
        let info = h.store.room(&room).await.unwrap();
        assert_eq!(info.stats.active, 1);
    }

    pub async fn leaving_with_a_pass_frees_its_slot(h: &Harness) {
        let room = h.room("r", 10, Some(1)).await;
        let (holder, _) = h.join(&room).await;
        let (waiter, _) = h.join(&room).await;
        h.store.leave(&room, holder).await.unwrap();
        assert!(matches!(h.state(&room, holder).await, PlaceState::Left));
        assert_eq!(h.tick(&room).await, 1);
        assert!(is_admitted(h.state(&room, waiter).await));
    }

    pub async fn join_is_idempotent(h: &Harness) {
        let room = h.room("r", 1, None).await;
        h.join(&room).await;
        let (visitor, first) = h.join(&room).await;
        for _ in 0..5 {
            let again = h.store.join(&room, visitor).await.unwrap().state;
            assert_eq!(again, first, "a double submit keeps the one place");
        }
        assert_eq!(h.store.room(&room).await.unwrap().stats.waiting, 1);
        // Admitted visitors who join again keep their pass.
        h.tick(&room).await;
        let admitted = h.state(&room, visitor).await;
        assert!(is_admitted(admitted));
        assert_eq!(h.store.join(&room, visitor).await.unwrap().state, admitted);
    }

    pub async fn reentry_after_admission_or_leave_goes_to_the_back(h: &Harness) {
        let room = h.room("r", 1, Some(1)).await;
        h.patch(&room, r#"{"pass_ttl_s": 4}"#).await;
        let (returning, state) = h.join(&room).await;
        assert!(is_admitted(state));
        let (_, a) = h.join(&room).await;
        let (leaver, b) = h.join(&room).await;
        assert_eq!((position(a), position(b)), (1, 2));
        // The pass runs out; coming back means the back of the line.
        h.clock.advance_ms(4_000);
        assert!(matches!(
            h.state(&room, returning).await,
            PlaceState::Expired
        ));
        assert_eq!(
            position(h.store.join(&room, returning).await.unwrap().state),
            3
        );
        // Leaving and coming back: the back again.
        h.store.leave(&room, leaver).await.unwrap();
        assert_eq!(
            position(h.store.join(&room, leaver).await.unwrap().state),
            3
        );
        assert_eq!(position(h.state(&room, returning).await), 2);
    }

    pub async fn absent_visitors_lose_their_place_and_burn_no_admission(h: &Harness) {
        let room = h.room("r", 1, None).await;
        h.patch(&room, r#"{"abandon_after_s": 20}"#).await;
        h.join(&room).await;
        let (gone, _) = h.join(&room).await;
        let (present, state) = h.join(&room).await;
        assert_eq!(position(state), 2);
        // 25 s pass; only `present` polls in between.
        for _ in 0..4 {
            h.clock.advance_ms(5_000);
            h.store.touch(&room, &[present]).await.unwrap();
        }
        h.clock.advance_ms(5_000);
        let report = h.store.tick(&room).await.unwrap().ran.unwrap();
        assert_eq!((report.abandoned, report.admitted), (1, 1));
        assert!(
            is_admitted(h.state(&room, present).await),
            "the absent head burned no admission"
        );
        assert!(matches!(h.state(&room, gone).await, PlaceState::Away));
    }

    /// A visitor back after a pass (their socket marked them present while
    /// they held it, long ago) keeps the new place for the whole grace from
    /// joining again, and loses it only when that grace passes unseen.
    pub async fn a_new_place_counts_from_its_joining_whatever_marked_its_visitor_before(
        h: &Harness,
    ) {
        let room = h.room("r", 1, None).await;
        h.patch(&room, r#"{"abandon_after_s": 20}"#).await;
        let (back, state) = h.join(&room).await;
        assert!(is_admitted(state), "straight through");
        h.store.touch(&room, &[back]).await.unwrap();
        h.store.leave(&room, back).await.unwrap();
        h.patch(&room, r#"{"paused": true}"#).await;
        h.clock.advance_ms(25_000);
        let again = h.store.join(&room, back).await.unwrap().state;
        assert_eq!(position(again), 1);
        let report = h.store.tick(&room).await.unwrap().ran.unwrap();
        assert_eq!(report.abandoned, 0, "kept: it joined just now");
        h.clock.advance_ms(19_999);
        let tick = h.store.tick(&room).await.unwrap();
        assert_eq!(
            tick.ran.map_or(0, |r| r.abandoned),
            0,
            "kept within the grace"
        );
        h.clock.advance_ms(1);
        let report = h.store.tick(&room).await.unwrap().ran.unwrap();
        assert_eq!(report.abandoned, 1, "gone once the grace passed unseen");
    }

    /// A place kept five minutes by default; its visitor, swept after
    /// that, is told why (`Away`) for as long as `AWAY_REMEMBERED_MS`, then
    /// plainly `Expired`; joining again is a new place at the back.
    pub async fn a_visitor_away_too_long_is_told_so_and_rejoins_at_the_back(h: &Harness) {
        use waitroom::words::constants::AWAY_REMEMBERED_MS;
        let room = h.room("r", 1, None).await;
        let config = h.store.room(&room).await.unwrap().config;
        assert_eq!(
            config.abandon_after_s, 300,
            "the default keeps a place 5 min"
        );
        h.patch(&room, r#"{"paused": true}"#).await;
        let (away, _) = h.join(&room).await;
        let mut present = Vec::new();
        for _ in 0..2 {
            present.push(h.join(&room).await.0);
        }
        // Asking for the place would be a sign of life: the ticks' reports
        // say when it went. Four minutes and fifty seconds of silence keep it.
        async fn abandoned_in(h: &Harness, room: &RoomId, present: &[VisitorId], s: u64) -> u64 {
            let mut abandoned = 0;
            for _ in 0..s / 10 {
                h.clock.advance_ms(10_000);
                h.store.touch(room, present).await.unwrap();
                let tick = h.store.tick(room).await.unwrap();
                abandoned += tick.ran.map_or(0, |r| r.abandoned);
            }
            abandoned
        }
        assert_eq!(
            abandoned_in(h, &room, &present, 290).await,
            0,
            "kept at 290 s"
        );
        assert_eq!(
            abandoned_in(h, &room, &present, 20).await,
            1,
            "gone by 310 s"
        );
        assert!(matches!(h.state(&room, away).await, PlaceState::Away));
        assert_eq!(position(h.state(&room, present[0]).await), 1);
        // The reason is kept for the hour, then the visitor is a stranger.
        h.clock.advance_ms(AWAY_REMEMBERED_MS - 20_000);
        h.store.touch(&room, &present).await.unwrap();
        assert!(matches!(h.state(&room, away).await, PlaceState::Away));
        h.clock.advance_ms(20_000);
        assert!(matches!(h.state(&room, away).await, PlaceState::Expired));
        // Joining again is a new place behind those still there.
        h.store.touch(&room, &present).await.unwrap();
        let again = h.store.join(&room, away).await.unwrap().state;
        assert_eq!(position(again), 3);
    }

    pub async fn present_visitors_keep_their_place(h: &Harness) {
        let room = h.room("r", 1, None).await;
        h.patch(&room, r#"{"abandon_after_s": 20, "paused": true}"#)
            .await;
        let (polling, _) = h.join(&room).await;
        for _ in 0..10 {
            h.clock.advance_ms(10_000);
            assert_eq!(position(h.state(&room, polling).await), 1);
            h.store.tick(&room).await.unwrap();
        }
        assert_eq!(position(h.state(&room, polling).await), 1);
    }

    pub async fn places_read_many_as_status_reads_each(h: &Harness) {
        let room = h.room("r", 1, None).await;
        h.patch(&room, r#"{"abandon_after_s": 20}"#).await;
        let (admitted, state) = h.join(&room).await;
        assert!(is_admitted(state));
        let mut waiting = Vec::new();
        for _ in 0..3 {
            waiting.push(h.join(&room).await.0);
        }
        let (left, _) = h.join(&room).await;
        h.store.leave(&room, left).await.unwrap();
        let unknown = VisitorId::random();
        let mut asked = vec![admitted, unknown, left];
        asked.extend(waiting.iter().rev());
        let places = h.store.places(&room, &asked).await.unwrap();
        assert_eq!(places.len(), asked.len());
        for (visitor, place) in asked.iter().zip(&places) {
            let one = h.store.status(&room, *visitor).await.unwrap();
            assert_eq!(place.visitor, *visitor);
            assert_eq!(format!("{:?}", place.state), format!("{:?}", one.state));
            assert_eq!(place.line, one.line);
            assert_eq!(place.facts, one.facts);
        }
        assert_eq!(position(places[3].state), 3, "in the order asked");
        assert_eq!(position(places[5].state), 1);
        assert!(h.store.places(&room, &[]).await.unwrap().is_empty());

        // Read in a batch, the first two stay present; the third is not asked.
        h.patch(&room, r#"{"paused": true}"#).await;
        for _ in 0..3 {
            h.clock.advance_ms(10_000);
            h.store.places(&room, &waiting[..2]).await.unwrap();
            h.store.tick(&room).await.unwrap();
        }
        assert_eq!(position(h.state(&room, waiting[1]).await), 2);
        assert!(matches!(h.state(&room, waiting[2]).await, PlaceState::Away));

        h.store.close_room(&room).await.unwrap();
        let closed = h.store.places(&room, &waiting).await.unwrap();
        assert!(closed.iter().all(|p| matches!(p.state, PlaceState::Closed)));
        assert!(matches!(
            h.store
                .places(&RoomId::parse("nowhere").unwrap(), &waiting)
                .await,
            Err(StoreError::RoomNotFound(_))
        ));
    }

    pub async fn paused_rooms_admit_nobody(h: &Harness) {
        let room = h.room("r", 5, None).await;
        h.patch(&room, r#"{"paused": true}"#).await;
        let (visitor, state) = h.join(&room).await;
        assert_eq!(position(state), 1, "paused stops pass-through too");
        assert_eq!(h.tick(&room).await, 0);
        assert_eq!(
            h.store
                .status(&room, visitor)
                .await
                .unwrap()
                .line
                .eta_seconds(1),
            None
        );
        h.patch(&room, r#"{"paused": false}"#).await;
        assert_eq!(h.tick(&room).await, 1);
    }

    pub async fn eta_follows_the_achieved_rate(h: &Harness) {
        let room = h.room("r", 2, Some(4)).await;
        let mut line = Vec::new();
        for _ in 0..30 {
            line.push(h.join(&room).await.0);
        }
        // Before any tick, the configured rate: 2 per 5 s.
        let place = h.store.status(&room, line[29]).await.unwrap();
        let position = position(place.state);
        assert_eq!(position, 28);
        assert_eq!(place.line.eta_seconds(position), Some(70));
        // Two ticks at 2 per 5 s: 0.4/s achieved.
        h.tick(&room).await;
        let place = h.store.status(&room, line[29]).await.unwrap();
        assert_eq!(place.line.eta_seconds(26), Some(65));
        // Then the cap of 4 stops admission: the achieved rate falls and the ETA grows.
        h.tick(&room).await;
        for _ in 0..10 {
            assert_eq!(h.tick(&room).await, 0);
        }
        let place = h.store.status(&room, line[29]).await.unwrap();
        let eta = place
            .line
            .eta_seconds(24)
            .expect("something was admitted this minute");
        assert!(eta > 65 * 2, "eta {eta} reflects the slower achieved rate");
    }

    /// Right after the operator sets a new rate the achieved rate still
    /// speaks of the old one: the ETA divides by the configured rate until
    /// a whole window at the new one exists (design.md, rule 4), and is
    /// within 10% of the real wait from the first tick on (no cap, nobody
    /// leaving).
    pub async fn after_a_rate_change_the_eta_uses_the_new_rate_until_a_window_of_it(h: &Harness) {
        let room = h.room("r", 2, None).await;
        h.patch(&room, r#"{"abandon_after_s": 3600}"#).await;
        let mut line = Vec::new();
        for _ in 0..202 {
            line.push(h.join(&room).await.0);
        }
        let last = *line.last().unwrap();
        // A minute at 2 per tick: the achieved rate is 0.4 per second.
        for _ in 0..12 {
            assert_eq!(h.tick(&room).await, 2);
        }
        h.patch(&room, r#"{"admit_per_tick": 10}"#).await;
        assert_eq!(h.tick(&room).await, 10);
        let place = h.store.status(&room, last).await.unwrap();
        let at = position(place.state);
        assert_eq!(at, 202 - 2 - 24 - 10);
        let eta = place.line.eta_seconds(at).unwrap();
        // The real wait: a tick admits 10 every 5 s.
        let real = at.div_ceil(10) * TICK_MS / 1000;
        assert!(
            eta.abs_diff(real) * 10 <= real,
            "eta {eta} s against a real wait of {real} s"
        );
        // A whole window at the new rate: the achieved rate is 2 per second.
        for _ in 0..12 {
            assert_eq!(h.tick(&room).await, 10);
        }
        let place = h.store.status(&room, last).await.unwrap();
        let at = position(place.state);
        assert_eq!(place.line.rate_per_s, Some(2.0));
        assert_eq!(place.line.eta_seconds(at), Some(at / 2));
    }

    pub async fn positions_count_only_those_still_ahead(h: &Harness) {
        let room = h.room("r", 1, None).await;
        h.join(&room).await;
        let mut line = Vec::new();
        for _ in 0..6 {
            line.push(h.join(&room).await.0);
        }
        h.store.leave(&room, line[1]).await.unwrap();
        h.store.leave(&room, line[4]).await.unwrap();
        let expect = [(0, 1), (2, 2), (3, 3), (5, 4)];
        for (i, pos) in expect {
            assert_eq!(position(h.state(&room, line[i]).await), pos);
        }
        let stats = h.store.room(&room).await.unwrap().stats;
        assert_eq!(stats.waiting, 4);
    }

    pub async fn closed_rooms_tell_visitors_and_refuse_joins(h: &Harness) {
        let room = h.room("r", 1, None).await;
        h.join(&room).await;
        let (waiting, _) = h.join(&room).await;
        h.store.close_room(&room).await.unwrap();
        assert!(matches!(h.state(&room, waiting).await, PlaceState::Closed));
        assert!(matches!(
            h.store.join(&room, VisitorId::random()).await,
            Err(StoreError::RoomClosed(_))
        ));
        assert!(matches!(
            h.store.room(&room).await,
            Err(StoreError::RoomNotFound(_))
        ));
        assert!(h.store.rooms().await.unwrap().is_empty());
        // The id can be used again.
        h.room("r", 1, None).await;
    }

    pub async fn a_notice_reaches_every_place_and_the_event_of_its_change(h: &Harness) {
        let room = h.room("r", 1, None).await;
        h.patch(&room, r#"{"paused": true}"#).await;
        let (visitor, _) = h.join(&room).await;
        h.store.watch(&room).await.unwrap();
        let mut events = h.store.subscribe();
        // Any character, the event encoding's own '|' included.
        h.patch(
            &room,
            r#"{"notice": "Doors open at 9 | bring ID\nno bags"}"#,
        )
        .await;
        let facts = loop {
            let event = tokio::time::timeout(std::time::Duration::from_secs(10), events.recv())
                .await
                .expect("the change is published")
                .unwrap();
            if let StoreEvent::Room(RoomEvent::Configured { facts, .. }) = event {
                break facts;
            }
        };
        let notice = Some("Doors open at 9 | bring ID\nno bags");
        assert_eq!(facts.notice.as_deref(), notice);
        assert_eq!(facts.target_url, "https://shop.example/buy");
        let place = h.store.status(&room, visitor).await.unwrap();
        assert_eq!(place.facts.notice.as_deref(), notice);
        assert_eq!(
            h.store.room(&room).await.unwrap().config.notice.as_deref(),
            notice
        );
        h.patch(&room, r#"{"notice": ""}"#).await;
        let place = h.store.status(&room, visitor).await.unwrap();
        assert_eq!(place.facts.notice, None, "an empty notice is none");
    }

    pub async fn a_rooms_language_is_kept_as_its_code_and_a_bad_one_changes_nothing(h: &Harness) {
        let id = RoomId::parse("r").unwrap();
        let mut config = RoomConfig::new("Test room", "https://shop.example/buy");
        config.language = Language::Japanese;
        h.store.create_room(id.clone(), config).await.unwrap();
        let stored = || async { h.store.room(&id).await.unwrap().config.language };
        assert_eq!(stored().await, Language::Japanese);
        h.patch(&id, r#"{"paused": true}"#).await;
        assert_eq!(stored().await, Language::Japanese, "another field keeps it");
        h.patch(&id, r#"{"language": "zh-SG"}"#).await;
        assert_eq!(stored().await, Language::SimplifiedChinese);
        let bad: ConfigPatch = serde_json::from_str(r#"{"language": "klingon"}"#).unwrap();
        match h.store.configure(&id, bad).await {
            Err(StoreError::InvalidConfig(error)) => {
                assert_eq!(error.field, "language");
                assert!(error.message.contains("\"klingon\""), "{error}");
            }
            other => panic!("a bad language was taken: {other:?}"),
        }
        assert_eq!(stored().await, Language::SimplifiedChinese, "nothing lost");
        h.patch(&id, r#"{"language": "pt-PT"}"#).await;
        assert_eq!(stored().await, Language::BrazilianPortuguese);
    }

    pub async fn a_room_keeps_its_page_branding_field_by_field(h: &Harness) {
        async fn page_of(h: &Harness, room: &RoomId) -> waitroom::words::page::PageBranding {
            h.store.room(room).await.unwrap().config.page
        }
        let room = h.room("r", 1, None).await;
        assert!(
            page_of(h, &room).await.is_empty(),
            "a new room has the default page"
        );
        // Markup, quotes, a '|' and line breaks are kept as given.
        h.patch(
            &room,
            r##"{"page": {"headline": "Spring \"drop\" | 봄", "message": "<b>Doors</b> at 9\nbring ID",
                "accent_color": "#0a7a3b", "logo_url": "https://cdn.example/logo.svg"}}"##,
        )
        .await;
        let first = page_of(h, &room).await;
        assert_eq!(first.headline.as_deref(), Some("Spring \"drop\" | 봄"));
        assert_eq!(
            first.message.as_deref(),
            Some("<b>Doors</b> at 9\nbring ID")
        );
        assert_eq!(first.accent_color.as_deref(), Some("#0a7a3b"));
        // A later change names one field: the others stay; "" removes one.
        h.patch(
            &room,
            r##"{"page": {"footer": "© Shop", "accent_color": ""}}"##,
        )
        .await;
        let second = page_of(h, &room).await;
        assert_eq!(second.footer.as_deref(), Some("© Shop"));
        assert_eq!(second.accent_color, None);
        assert_eq!(second.headline, first.headline);
        assert_eq!(second.logo_url, first.logo_url);
        // A change of another field leaves the page alone.
        h.patch(&room, r#"{"paused": true}"#).await;
        assert_eq!(page_of(h, &room).await, second);
        // A bad value changes nothing.
        let bad: ConfigPatch =
            serde_json::from_str(r##"{"page": {"background_color": "blue"}}"##).unwrap();
        let refused = h.store.configure(&room, bad).await;
        assert!(refused.is_err(), "{refused:?}");
        assert_eq!(page_of(h, &room).await, second);
        h.patch(&room, r#"{"page": null}"#).await;
        assert!(
            page_of(h, &room).await.is_empty(),
            "null removes the whole page"
        );
    }

    pub async fn reject_turns_new_arrivals_away_and_keeps_the_line(h: &Harness) {
        let room = h.room("r", 1, None).await;
        h.patch(&room, r#"{"paused": true}"#).await;
        let (kept, _) = h.join(&room).await;
        h.patch(&room, r#"{"queue_method": "reject"}"#).await;
        assert!(matches!(
            h.store.join(&room, VisitorId::random()).await,
            Err(StoreError::NotAccepting)
        ));
        let again = h.store.join(&room, kept).await.unwrap();
        assert_eq!(position(again.state), 1, "those waiting keep their places");
        assert_eq!(h.store.room(&room).await.unwrap().stats.turned_away, 1);
        h.patch(&room, r#"{"queue_method": "fifo"}"#).await;
        let (_, next) = h.join(&room).await;
        assert_eq!(position(next), 2, "switched back live");
    }

    pub async fn closes_at_turns_away_arrivals_after_it(h: &Harness) {
        let room = h.room("r", 1, None).await;
        h.patch(
            &room,
            r#"{"paused": true, "closes_at": "2026-01-01T00:00:10Z"}"#,
        )
        .await;
        let (early, _) = h.join(&room).await;
        // A place tells its room's closing (a ticket lasts until then at least).
        let place = h.store.status(&room, early).await.unwrap();
        assert_eq!(
            place.facts.closes_at.map(|at| at.0),
            Some(1_767_225_610_000)
        );
        h.clock.advance_ms(10_000);
        assert!(matches!(
            h.store.join(&room, VisitorId::random()).await,
            Err(StoreError::NotAccepting)
        ));
        h.patch(&room, r#"{"paused": false}"#).await;
        assert_eq!(h.tick(&room).await, 1, "the line already waiting goes on");
        assert!(is_admitted(h.state(&room, early).await));
        let config = h.store.room(&room).await.unwrap().config;
        assert_eq!(config.closes_at.map(|at| at.0), Some(1_767_225_610_000));
    }

    /// What a changed setting means for the store's own rules, at once:
    /// the promoter's part (asking again at once) is in tests/api/promoter.rs.
    pub async fn every_config_change_is_in_force_at_once_up_and_down(h: &Harness) {
        use waitroom::words::clock::{Clock, rfc3339};
        let room = h.room("r", 5, None).await;
        h.patch(&room, r#"{"admit_per_tick": 2}"#).await;
        let through: Vec<bool> = [
            h.join(&room).await,
            h.join(&room).await,
            h.join(&room).await,
        ]
        .into_iter()
        .map(|(_, state)| is_admitted(state))
        .collect();
        assert_eq!(
            through,
            [true, true, false],
            "admit_per_tick down: the bucket keeps no tokens above the new rate"
        );
        h.patch(&room, r#"{"admit_per_tick": 4}"#).await;
        assert_eq!(h.tick(&room).await, 1, "up: the next tick refills to it");
        let mut admitted = 0;
        for _ in 0..4 {
            admitted += u64::from(is_admitted(h.join(&room).await.1));
        }
        assert_eq!(admitted, 3, "the tick's 4 tokens less the one it spent");

        // 6 hold a pass; one waits.
        h.patch(&room, r#"{"max_active": 3}"#).await;
        assert_eq!(
            h.tick(&room).await,
            0,
            "max_active down: nobody while above it"
        );
        h.patch(&room, r#"{"max_active": null}"#).await;
        assert_eq!(
            h.tick(&room).await,
            1,
            "max_active up: the next tick admits"
        );

        h.patch(&room, r#"{"paused": true}"#).await;
        assert!(
            !is_admitted(h.join(&room).await.1),
            "paused: no pass-through, tokens or not"
        );
        assert_eq!(h.tick(&room).await, 0, "paused: no admission");
        h.patch(&room, r#"{"paused": false}"#).await;
        assert_eq!(h.tick(&room).await, 1, "unpaused: the next tick admits");

        h.patch(&room, r#"{"queue_method": "reject"}"#).await;
        assert!(matches!(
            h.store.join(&room, VisitorId::random()).await,
            Err(StoreError::NotAccepting)
        ));
        h.patch(&room, r#"{"queue_method": "passthrough"}"#).await;
        assert!(is_admitted(h.join(&room).await.1), "passthrough: at once");
        h.patch(&room, r#"{"queue_method": "fifo"}"#).await;
        let mut admitted = 0;
        for _ in 0..3 {
            admitted += u64::from(is_admitted(h.join(&room).await.1));
        }
        assert_eq!(
            admitted, 2,
            "fifo again: the bucket's 2 tokens, then the line"
        );

        let now = rfc3339(h.clock.now_ms());
        h.patch(&room, &format!(r#"{{"closes_at": "{now}"}}"#))
            .await;
        assert!(
            matches!(
                h.store.join(&room, VisitorId::random()).await,
                Err(StoreError::NotAccepting)
            ),
            "closes_at moved to now: closed at once"
        );
        let later = rfc3339(waitroom::words::clock::Clock::now_ms(&h.clock) + 3_600_000);
        h.patch(&room, &format!(r#"{{"closes_at": "{later}"}}"#))
            .await;
        h.join(&room).await;

        // tick_ms: due at once at a shorter period, not before a longer one.
        h.tick(&room).await;
        h.patch(&room, r#"{"tick_ms": 1000}"#).await;
        h.clock.advance_ms(1_000);
        assert!(
            h.store.tick(&room).await.unwrap().ran.is_some(),
            "tick_ms down"
        );
        h.patch(&room, r#"{"tick_ms": 60000}"#).await;
        h.clock.advance_ms(5_000);
        let tick = h.store.tick(&room).await.unwrap();
        assert!(tick.ran.is_none(), "tick_ms up: not before the new period");
        assert_eq!(tick.next_due_in_ms, 55_000);

        // opens_at moved to now: open at once; moved later: not at the old time.
        let soon = rfc3339(h.clock.now_ms() + 60_000);
        let drop = h.room("drop", 1, None).await;
        h.patch(&drop, &format!(r#"{{"opens_at": "{soon}"}}"#))
            .await;
        let (entrant, state) = h.join(&drop).await;
        assert!(matches!(state, PlaceState::PreQueue { .. }));
        let now = rfc3339(h.clock.now_ms());
        h.patch(&drop, &format!(r#"{{"opens_at": "{now}"}}"#)).await;
        assert_eq!(
            position(h.state(&drop, entrant).await),
            1,
            "opens_at down: open now"
        );
        let late = h.room("late", 1, None).await;
        h.patch(&late, &format!(r#"{{"opens_at": "{soon}"}}"#))
            .await;
        let (entrant, _) = h.join(&late).await;
        let far = rfc3339(waitroom::words::clock::Clock::now_ms(&h.clock) + 3_600_000);
        h.patch(&late, &format!(r#"{{"opens_at": "{far}"}}"#)).await;
        h.clock.advance_ms(60_000);
        h.store.touch(&late, &[entrant]).await.unwrap();
        assert!(
            matches!(h.state(&late, entrant).await, PlaceState::PreQueue { .. }),
            "opens_at up: still before the opening"
        );
    }

    pub async fn passthrough_admits_every_arrival_and_then_the_line(h: &Harness) {
        let room = h.room("r", 1, Some(1)).await;
        h.join(&room).await; // through: the one token, the one slot
        let (waiting, _) = h.join(&room).await;
        assert_eq!(position(h.state(&room, waiting).await), 1);
        h.patch(&room, r#"{"queue_method": "passthrough"}"#).await;
        let (_, arrival) = h.join(&room).await;
        assert!(is_admitted(arrival), "bucket and cap ignored");
        h.tick(&room).await;
        assert!(
            is_admitted(h.state(&room, waiting).await),
            "the line at the next tick"
        );
        assert_eq!(h.store.room(&room).await.unwrap().stats.active, 3);
    }

    pub async fn random_admits_anyone_waiting_not_the_head(h: &Harness) {
        let room = h.room("r", 1, None).await;
        h.patch(&room, r#"{"paused": true}"#).await;
        let mut line = Vec::new();
        for _ in 0..50 {
            line.push(h.join(&room).await.0);
        }
        h.patch(
            &room,
            r#"{"queue_method": "random", "paused": false, "abandon_after_s": 86400}"#,
        )
        .await;
        for _ in 0..25 {
            assert_eq!(h.tick(&room).await, 1, "the rate still holds");
        }
        let mut back_half_admitted = 0;
        for visitor in &line[25..] {
            if is_admitted(h.state(&room, *visitor).await) {
                back_half_admitted += 1;
            }
        }
        // All 25 from the front half by chance: 1 in C(50, 25), about 1e-14.
        assert!(back_half_admitted > 0, "random reached past the head");
        assert_eq!(h.store.room(&room).await.unwrap().stats.waiting, 25);
    }

    pub async fn join_limits_hold_per_address_on_a_driven_clock(h: &Harness) {
        let room = h.room("r", 1, None).await;
        h.patch(&room, r#"{"paused": true}"#).await; // everyone waits
        let from = |client: &str| JoinOptions {
            limit: Some(JoinLimit {
                client: client.into(),
                per_minute: 3,
            }),
            ..JoinOptions::default()
        };
        let join = |visitor: VisitorId, client: &'static str| {
            let options = from(client);
            let store = h.store.clone();
            let room = room.clone();
            async move { store.join_with(&room, visitor, &options).await }
        };
        let first = VisitorId::random();
        join(first, "203.0.113.7").await.unwrap();
        join(VisitorId::random(), "203.0.113.7").await.unwrap();
        join(VisitorId::random(), "203.0.113.7").await.unwrap();
        let refused = join(VisitorId::random(), "203.0.113.7").await;
        assert!(
            matches!(refused, Err(StoreError::RateLimited { retry_after_s: 20 })),
            "a minute's worth (3) at once, then one per 20 s: {refused:?}"
        );
        assert!(
            join(first, "203.0.113.7").await.is_ok(),
            "a visitor with a place gets it back: only new places count"
        );
        assert!(
            join(VisitorId::random(), "2001:db8::1").await.is_ok(),
            "each address has its own limit"
        );
        assert_eq!(h.store.room(&room).await.unwrap().stats.waiting, 4);

        h.clock.advance_ms(19_999);
        assert!(matches!(
            join(VisitorId::random(), "203.0.113.7").await,
            Err(StoreError::RateLimited { retry_after_s: 1 })
        ));
        h.clock.advance_ms(1);
        join(VisitorId::random(), "203.0.113.7").await.unwrap();
        assert!(join(VisitorId::random(), "203.0.113.7").await.is_err());

        let stats = h.store.room(&room).await.unwrap().stats;
        assert_eq!(stats.waiting, 5, "a refused join creates no place");
        assert_eq!(stats.turned_away, 3);
        assert!(
            h.store.join(&room, VisitorId::random()).await.is_ok(),
            "a join without a limit is not limited"
        );
    }

    /// Issue 40, item 9: wrong operator logins counted per client block in
    /// the store (so on Redis for every node at once): 10 a minute, a
    /// minute's worth at once, then every attempt from the block, the
    /// right token included, is refused until one comes back (every 6 s).
    pub async fn wrong_logins_lock_a_block_out_on_a_driven_clock(h: &Harness) {
        use waitroom::words::join_limit::ClientBlock;
        use waitroom::words::login_limit::{Attempt, FAILURES_PER_MINUTE};
        let guesser = ClientBlock::Net("203.0.113.7/32".parse().unwrap());
        let network = ClientBlock::Net("2001:db8:7:7::/64".parse().unwrap());
        let attempt = |block: ClientBlock, attempt: Attempt| {
            let store = h.store.clone();
            async move { store.login_attempt(&block, attempt).await }
        };
        for _ in 0..3 {
            attempt(guesser, Attempt::Right).await.unwrap();
        }
        for _ in 0..FAILURES_PER_MINUTE {
            attempt(guesser, Attempt::Wrong).await.unwrap();
        }
        for tried in [Attempt::Wrong, Attempt::Right] {
            let refused = attempt(guesser, tried).await;
            assert!(
                matches!(
                    refused,
                    Err(StoreError::TooManyAttempts { retry_after_s: 6 })
                ),
                "past 10 wrong a minute, {tried:?}: {refused:?}"
            );
        }
        attempt(network, Attempt::Wrong).await.unwrap();
        attempt(ClientBlock::Unknown, Attempt::Right).await.unwrap();

        h.clock.advance_ms(5_999);
        assert!(matches!(
            attempt(guesser, Attempt::Right).await,
            Err(StoreError::TooManyAttempts { retry_after_s: 1 })
        ));
        h.clock.advance_ms(1);
        attempt(guesser, Attempt::Right).await.unwrap();
        attempt(guesser, Attempt::Wrong).await.unwrap();
        assert!(attempt(guesser, Attempt::Right).await.is_err());
        h.clock.advance_ms(60_000);
        for _ in 0..FAILURES_PER_MINUTE {
            attempt(guesser, Attempt::Wrong).await.unwrap();
        }
    }

    fn pass_exp_s(state: PlaceState) -> u64 {
        match state {
            PlaceState::Admitted { expires_at, .. } => expires_at / 1000,
            other => panic!("expected admitted, got {other:?}"),
        }
    }

    pub async fn revoking_a_pass_frees_its_slot_at_once(h: &Harness) {
        let room = h.room("r", 1, Some(1)).await;
        let (holder, admitted) = h.join(&room).await;
        let (waiting, _) = h.join(&room).await;
        let exp = pass_exp_s(admitted);
        assert!(
            !h.store
                .revoke_pass(&room, holder, Some(exp + 1), PassTakenBack::Revoked)
                .await
                .unwrap(),
            "another admission's pass takes nothing"
        );
        assert!(is_admitted(h.state(&room, holder).await));
        assert!(
            !h.store
                .revoke_pass(&room, waiting, None, PassTakenBack::Revoked)
                .await
                .unwrap(),
            "a waiting place holds no pass"
        );
        assert_eq!(position(h.state(&room, waiting).await), 1);

        assert!(
            h.store
                .revoke_pass(&room, holder, Some(exp), PassTakenBack::Revoked)
                .await
                .unwrap()
        );
        assert!(matches!(h.state(&room, holder).await, PlaceState::Left));
        assert_eq!(h.store.room(&room).await.unwrap().stats.active, 0);
        assert_eq!(h.tick(&room).await, 1, "the slot is free for the next");
        assert!(is_admitted(h.state(&room, waiting).await));
        assert!(
            h.store
                .revoke_pass(&room, waiting, None, PassTakenBack::Revoked)
                .await
                .unwrap(),
            "by visitor: whatever pass they hold"
        );
    }

    pub async fn passes_never_seen_are_reclaimed_as_no_shows(h: &Harness) {
        let room = h.room("r", 2, Some(2)).await;
        h.patch(&room, r#"{"arrival_grace_s": 30}"#).await;
        let (arrives, _) = h.join(&room).await;
        let (never, _) = h.join(&room).await;
        let (next, _) = h.join(&room).await;
        assert_eq!(position(h.state(&room, next).await), 1);
        let seen = h.arrive(&room, arrives).await;
        assert!(is_admitted(seen), "arrive reads the place");

        h.clock.advance_ms(29_999);
        assert_eq!(h.store.tick(&room).await.unwrap().ran.unwrap().admitted, 0);
        assert!(is_admitted(h.state(&room, never).await), "still in grace");
        h.clock.advance_ms(1); // 30 s: the grace is over, and a tick is due
        let report = h.store.tick(&room).await.unwrap().ran.unwrap();
        assert_eq!(
            (report.no_shows, report.admitted),
            (1, 1),
            "the no-show's slot went to the next"
        );
        assert!(matches!(h.state(&room, never).await, PlaceState::Left));
        assert!(is_admitted(h.state(&room, arrives).await), "seen: kept");
        assert!(is_admitted(h.state(&room, next).await));
        let stats = h.store.room(&room).await.unwrap().stats;
        assert_eq!((stats.no_shows, stats.active), (1, 2));
        assert_eq!(
            h.store.room(&room).await.unwrap().config.arrival_grace_s,
            Some(30)
        );
    }

    /// No sweep grows with the crowd: more than a slice of absent visitors
    /// is swept a slice per call. The due tick that finds them sweeps one
    /// and asks to be called again soon; the calls after it sweep on though
    /// no tick is due, admitting nobody, until the rest is gone; nothing is
    /// lost, and the schedule is back.
    pub async fn a_mass_lapse_is_swept_a_slice_at_a_time(h: &Harness) {
        let room = h.room("r", 1, None).await;
        h.patch(&room, r#"{"abandon_after_s": 20, "paused": true}"#)
            .await;
        let lapsing = 2 * SWEEP_SLICE + SWEEP_SLICE / 2;
        for _ in 0..lapsing {
            h.join(&room).await;
        }
        h.clock.advance_ms(25_000);
        let mut swept = Vec::new();
        loop {
            let tick = h.store.tick(&room).await.unwrap();
            let Some(report) = tick.ran else { break };
            assert_eq!(report.admitted, 0);
            let more = report.abandoned == SWEEP_SLICE;
            assert_eq!(
                tick.next_due_in_ms <= SWEEP_AGAIN_MS,
                more,
                "due again soon while there is more to sweep"
            );
            swept.push(report.abandoned);
        }
        assert_eq!(swept, [SWEEP_SLICE, SWEEP_SLICE, SWEEP_SLICE / 2]);
        assert_eq!(h.store.room(&room).await.unwrap().stats.waiting, 0);
    }

    /// The same when some of those lapsing showed a sign of life after
    /// joining and some never did (on Redis a join does not mark its
    /// visitor present: the first sign does, and the tick walks the line
    /// for those never seen). Each wave needs more than one call, no call
    /// sweeps more than a slice, and every absent visitor goes, only when
    /// due.
    pub async fn a_lapse_of_the_seen_and_the_never_seen_is_swept_a_slice_at_a_time(h: &Harness) {
        async fn sweep(h: &Harness, room: &RoomId) -> Vec<u64> {
            let mut swept = Vec::new();
            while let Some(report) = h.store.tick(room).await.unwrap().ran {
                assert_eq!(report.admitted, 0);
                swept.push(report.abandoned);
            }
            swept
        }
        let room = h.room("r", 1, None).await;
        h.patch(&room, r#"{"abandon_after_s": 20, "paused": true}"#)
            .await;
        let count = 2 * SWEEP_SLICE + SWEEP_SLICE / 2;
        let mut visitors = Vec::new();
        for _ in 0..count {
            visitors.push(h.join(&room).await.0);
        }
        // Every other visitor shows a sign of life 10 s in; then all go quiet.
        let seen: Vec<VisitorId> = visitors.iter().copied().step_by(2).collect();
        let never_seen = count - seen.len() as u64;
        h.clock.advance_ms(10_000);
        h.store.touch(&room, &seen).await.unwrap();
        // 25 s after joining, 15 s after the sign: the never seen are due.
        h.clock.advance_ms(15_000);
        let first = sweep(h, &room).await;
        assert!(
            first.len() > 1,
            "more than a slice needs more than one call: {first:?}"
        );
        assert!(first.iter().all(|&n| n <= SWEEP_SLICE), "{first:?}");
        assert_eq!(first.iter().sum::<u64>(), never_seen);
        let waiting = h.store.room(&room).await.unwrap().stats.waiting;
        assert_eq!(waiting, seen.len() as u64, "those seen since are kept");
        // 20 s after the sign: the rest.
        h.clock.advance_ms(10_000);
        let second = sweep(h, &room).await;
        assert!(second.len() > 1, "{second:?}");
        assert!(second.iter().all(|&n| n <= SWEEP_SLICE), "{second:?}");
        assert_eq!(second.iter().sum::<u64>(), seen.len() as u64);
        assert_eq!(h.store.room(&room).await.unwrap().stats.waiting, 0);
        for visitor in [visitors[0], visitors[1], visitors[count as usize - 1]] {
            assert!(matches!(h.state(&room, visitor).await, PlaceState::Away));
        }
    }

    /// The same for passes never seen arriving: a slice of no-shows per
    /// call, every one of them reclaimed in the end. The call between ticks
    /// that reclaims the rest admits and drops no one, so it moves no place:
    /// the line keeps its version and no event reaches the sockets (a due
    /// tick is a new version, as ever).
    pub async fn passes_never_seen_are_reclaimed_a_slice_at_a_time(h: &Harness) {
        async fn version(h: &Harness, room: &RoomId, visitor: VisitorId) -> u64 {
            h.store.status(room, visitor).await.unwrap().line.version
        }
        let admitted = SWEEP_SLICE + SWEEP_SLICE / 2;
        let room = h.room("r", admitted as u32, None).await;
        h.patch(&room, r#"{"arrival_grace_s": 10, "abandon_after_s": 3600}"#)
            .await;
        for _ in 0..admitted {
            assert!(is_admitted(h.join(&room).await.1), "straight through");
        }
        let (waiting, state) = h.join(&room).await;
        assert_eq!(position(state), 1, "the bucket is spent");
        h.patch(&room, r#"{"paused": true}"#).await;
        h.clock.advance_ms(TICK_MS.max(10_000));
        let first = h.store.tick(&room).await.unwrap();
        assert_eq!(first.ran.unwrap().no_shows, SWEEP_SLICE);
        assert!(first.next_due_in_ms <= SWEEP_AGAIN_MS);
        let after_the_tick = version(h, &room, waiting).await;
        let second = h.store.tick(&room).await.unwrap();
        let sweep = second.ran.unwrap();
        assert_eq!((sweep.no_shows, sweep.admitted), (SWEEP_SLICE / 2, 0));
        assert!(second.next_due_in_ms > SWEEP_AGAIN_MS);
        let stats = h.store.room(&room).await.unwrap().stats;
        assert_eq!((stats.no_shows, stats.active), (admitted, 0));
        assert_eq!(
            version(h, &room, waiting).await,
            after_the_tick,
            "a sweep that moved no place is no new version"
        );
        h.clock.advance_ms(TICK_MS);
        assert_eq!(h.store.tick(&room).await.unwrap().ran.unwrap().admitted, 0);
        assert_eq!(version(h, &room, waiting).await, after_the_tick + 1);
    }

    /// Passes that run out together are swept a slice per call, while
    /// every visitor whose pass ran out is told so at once, swept or not,
    /// and may join again at once.
    pub async fn a_mass_expiry_is_swept_a_slice_at_a_time_and_told_at_once(h: &Harness) {
        let admitted = 3 * SWEEP_SLICE + SWEEP_SLICE / 2;
        let room = h.room("r", admitted as u32, None).await;
        h.patch(&room, r#"{"abandon_after_s": 3600}"#).await;
        // Ids in order, so the sweeps' order (soonest expiry, then id) is known.
        let visitors: Vec<VisitorId> = (1..=admitted).map(VisitorId).collect();
        for visitor in &visitors {
            let state = h.store.join(&room, *visitor).await.unwrap().state;
            assert!(is_admitted(state), "straight through");
        }
        let ttl_s = h.store.room(&room).await.unwrap().config.pass_ttl_s;
        h.clock.advance_ms(ttl_s * 1000);
        // The last of them, whom no sweep has reached, joins again: a new
        // place, at the back of an empty line.
        let last = *visitors.last().unwrap();
        let again = h.store.join(&room, last).await.unwrap().state;
        assert_eq!(position(again), 1);
        let slice = SWEEP_SLICE as usize;
        let active = h.store.room(&room).await.unwrap().stats.active;
        assert_eq!(
            active,
            admitted - 1 - 2 * SWEEP_SLICE,
            "two calls swept a slice each, the rejoining visitor besides"
        );
        // Those no sweep has reached yet are told their pass ran out.
        let unswept = &visitors[3 * slice..visitors.len() - 1];
        let places = h.store.places(&room, unswept).await.unwrap();
        assert!(
            places
                .iter()
                .all(|place| matches!(place.state, PlaceState::Expired)),
            "{:?}",
            places
                .iter()
                .find(|p| !matches!(p.state, PlaceState::Expired))
        );
        assert_eq!(h.store.room(&room).await.unwrap().stats.active, 0);
    }

    /// A tick admits a slice at most, whether its bucket holds more or the
    /// line goes through (`passthrough`); the calls after it admit on,
    /// admitting nobody twice and nobody past the bucket.
    pub async fn a_large_admission_goes_a_slice_per_call(h: &Harness) {
        let slice = SWEEP_SLICE;
        for (method, bucket) in [("fifo", 2 * slice + slice / 2 + 7), ("passthrough", 1)] {
            let room = h.room(method, bucket as u32, None).await;
            let paused = r#"{"paused": true, "abandon_after_s": 3600}"#;
            h.patch(&room, paused).await;
            let line = 2 * slice + slice / 2;
            for _ in 0..line {
                h.join(&room).await;
            }
            let go = format!(r#"{{"paused": false, "queue_method": "{method}"}}"#);
            h.patch(&room, &go).await;
            h.clock.advance_ms(TICK_MS);
            let mut admitted = Vec::new();
            loop {
                let tick = h.store.tick(&room).await.unwrap();
                let Some(report) = tick.ran else { break };
                assert_eq!(
                    tick.next_due_in_ms <= SWEEP_AGAIN_MS,
                    report.admitted == slice,
                    "{method}: due again soon after a whole slice"
                );
                admitted.push(report.admitted);
            }
            assert_eq!(admitted, [slice, slice, slice / 2], "{method}");
            let stats = h.store.room(&room).await.unwrap().stats;
            assert_eq!((stats.waiting, stats.active), (0, line), "{method}");
        }
    }

    pub async fn resumed_arrivals_get_a_whole_grace_once_per_outage(h: &Harness) {
        let room = h.room("r", 3, Some(3)).await;
        h.patch(&room, r#"{"arrival_grace_s": 30, "abandon_after_s": 3600}"#)
            .await;
        let (arrived, _) = h.join(&room).await;
        let (unseen, _) = h.join(&room).await;
        let seen = h.store.tick(&room).await.unwrap().arrival_resumptions;
        assert_eq!(seen, 0);
        h.arrive(&room, arrived).await;

        h.clock.advance_ms(40_000); // the store was away from 10 s to 40 s
        assert_eq!(h.store.resume_arrivals(&room, Some(seen)).await.unwrap(), 1);
        h.clock.advance_ms(5_000);
        assert_eq!(
            h.store.resume_arrivals(&room, Some(seen)).await.unwrap(),
            1,
            "another node, after the same outage: nothing moves"
        );
        let (late, _) = h.join(&room).await; // admitted at 45 s: due at 75 s
        let tick = h.store.tick(&room).await.unwrap();
        assert_eq!(
            (tick.ran.unwrap().no_shows, tick.arrival_resumptions),
            (0, 1),
            "due at 30 s, but counted again from 40 s"
        );
        h.clock.advance_ms(24_999);
        assert_eq!(h.store.tick(&room).await.unwrap().ran.unwrap().no_shows, 0);
        h.clock.advance_ms(1); // 70 s: a whole grace after the return
        assert_eq!(h.store.tick(&room).await.unwrap().ran.unwrap().no_shows, 1);
        assert!(matches!(h.state(&room, unseen).await, PlaceState::Left));
        assert!(is_admitted(h.state(&room, arrived).await), "seen: kept");

        // A later outage, whose resumption counts again.
        assert_eq!(h.store.resume_arrivals(&room, Some(1)).await.unwrap(), 2);
        h.clock.advance_ms(5_000); // 75 s: the late one's own due passed
        assert_eq!(h.store.tick(&room).await.unwrap().ran.unwrap().no_shows, 0);
        h.clock.advance_ms(25_000);
        assert_eq!(h.store.tick(&room).await.unwrap().ran.unwrap().no_shows, 1);
        assert!(matches!(h.state(&room, late).await, PlaceState::Left));
        assert_eq!(h.store.room(&room).await.unwrap().stats.no_shows, 2);
    }

    /// Issue 26, item 1: resuming arrivals after an outage is one step
    /// whatever the crowd; the sweep moves each arrival to the new deadline
    /// a slice a call, and reclaims them a slice a call once it passes.
    pub async fn a_resumption_over_many_passes_is_one_step_and_loses_none(h: &Harness) {
        let admitted = SWEEP_SLICE + SWEEP_SLICE / 2;
        let room = h.room("r", admitted as u32, None).await;
        h.patch(&room, r#"{"arrival_grace_s": 10, "abandon_after_s": 3600}"#)
            .await;
        for _ in 0..admitted {
            assert!(is_admitted(h.join(&room).await.1), "straight through");
        }
        h.clock.advance_ms(30_000); // the store was away until 30 s
        assert_eq!(h.store.resume_arrivals(&room, None).await.unwrap(), 1);
        // Due at 10 s, but counted again from 30 s: the sweep moves them,
        // a slice a call, and takes nobody.
        let first = h.store.tick(&room).await.unwrap();
        assert_eq!(first.ran.unwrap().no_shows, 0);
        assert!(first.next_due_in_ms <= SWEEP_AGAIN_MS, "more to move");
        let second = h.store.tick(&room).await.unwrap();
        assert_eq!(second.ran.unwrap().no_shows, 0);
        assert!(second.next_due_in_ms > SWEEP_AGAIN_MS, "all moved");
        h.clock.advance_ms(9_999);
        assert_eq!(h.store.tick(&room).await.unwrap().ran.unwrap().no_shows, 0);
        h.clock.advance_ms(1); // 40 s: a whole grace after the return
        let third = h.store.tick(&room).await.unwrap();
        assert_eq!(third.ran.unwrap().no_shows, SWEEP_SLICE);
        let fourth = h.store.tick(&room).await.unwrap();
        assert_eq!(fourth.ran.unwrap().no_shows, SWEEP_SLICE / 2);
        let stats = h.store.room(&room).await.unwrap().stats;
        assert_eq!((stats.no_shows, stats.active), (admitted, 0));
    }

    /// Many joins at once (on Redis, sent together in one call: see
    /// `store/redis/join_batch.rs`), each answered as it would be alone:
    /// the bucket's two tokens admit two, the rest wait in one order with
    /// every position told once, a visitor asking twice and a user on two
    /// devices get one place each, an address's limit counts every join.
    pub async fn joins_made_at_once_are_each_answered_as_if_alone(h: &Harness) {
        use futures_util::future::join_all;
        let room = h.room("r", 2, None).await;
        let plain: Vec<VisitorId> = (0..60).map(|_| VisitorId::random()).collect();
        let twice = plain[30];
        let limited = JoinOptions {
            limit: Some(JoinLimit {
                client: "203.0.113.7/32".into(),
                per_minute: 3,
            }),
            ..JoinOptions::default()
        };
        let mut joins: Vec<(VisitorId, JoinOptions)> =
            plain.iter().map(|v| (*v, JoinOptions::default())).collect();
        joins.insert(45, (twice, JoinOptions::default()));
        for at in [10, 20, 40, 50, 55] {
            joins.insert(at, (VisitorId::random(), limited.clone()));
        }
        let (phone, laptop) = (VisitorId::random(), VisitorId::random());
        // A user's name may hold anything, a newline too (the last of a
        // join's fields in a batch, so no separator is confused with it).
        joins.insert(5, (phone, as_user("carol\n|x")));
        joins.push((laptop, as_user("carol\n|x")));
        let answers = join_all(
            joins
                .iter()
                .map(|(visitor, options)| h.store.join_with(&room, *visitor, options)),
        )
        .await;

        let mut admitted = 0;
        let mut positions = std::collections::BTreeMap::new();
        let mut rate_limited = 0;
        for ((visitor, _), answer) in joins.iter().zip(&answers) {
            match answer {
                Err(StoreError::RateLimited { .. }) => rate_limited += 1,
                Err(other) => panic!("{visitor}: {other:?}"),
                Ok(place) => match place.state {
                    PlaceState::Admitted { .. } => admitted += 1,
                    PlaceState::Waiting { position, .. } => {
                        let owner = place.visitor;
                        let told = *positions.entry(owner).or_insert(position);
                        assert_eq!(told, position, "{owner} told two positions");
                    }
                    other => panic!("{visitor}: {other:?}"),
                },
            }
        }
        assert_eq!(rate_limited, 2, "3 of the address's 5 joins in a minute");
        assert_eq!(admitted, 2, "the bucket's two tokens, no more");
        let stats = h.store.room(&room).await.unwrap().stats;
        assert_eq!(stats.waiting, positions.len() as u64);
        // 60 plain (one asked twice), 3 limited, carol once: 64 places.
        assert_eq!(positions.len() + admitted, 64);
        let mut told: Vec<u64> = positions.values().copied().collect();
        told.sort_unstable();
        assert_eq!(told, (1..=positions.len() as u64).collect::<Vec<_>>());
        for (visitor, position) in &positions {
            let now = h.store.status(&room, *visitor).await.unwrap().state;
            assert_eq!(super::position(now), *position, "{visitor}");
        }
        let carol = |v| answers[joins.iter().position(|(j, _)| *j == v).unwrap()].as_ref();
        assert_eq!(
            carol(phone).unwrap().visitor,
            carol(laptop).unwrap().visitor,
            "one place per user"
        );
    }

    fn as_user(user: &str) -> JoinOptions {
        JoinOptions {
            user: Some(user.into()),
            ..JoinOptions::default()
        }
    }

    /// A place or pass given up is gone from the store at once; `left` is
    /// told for `abandon_after_s` (for a pass, while it would have run),
    /// then the visitor is one the room never knew (`expired`), and coming
    /// back means the back of the line either way.
    pub async fn a_room_made_again_remembers_nothing_of_its_predecessors_visitors(h: &Harness) {
        let room = h.room("r", 1, None).await;
        h.patch(&room, r#"{"abandon_after_s": 3600, "pass_ttl_s": 3600}"#)
            .await;
        let (holder, state) = h.join(&room).await;
        assert!(is_admitted(state));
        h.patch(&room, r#"{"paused": true}"#).await;
        let (leaver, _) = h.join(&room).await;
        h.store.leave(&room, leaver).await.unwrap();
        h.store.leave(&room, holder).await.unwrap();
        let budget = JoinOptions {
            limit: Some(JoinLimit {
                client: "203.0.113.9".into(),
                per_minute: 1,
            }),
            ..JoinOptions::default()
        };
        h.store
            .join_with(&room, VisitorId::random(), &budget)
            .await
            .unwrap();
        let spent = h.store.join_with(&room, VisitorId::random(), &budget).await;
        assert!(
            matches!(spent, Err(StoreError::RateLimited { .. })),
            "{spent:?}"
        );
        for gone in [leaver, holder] {
            assert!(matches!(h.state(&room, gone).await, PlaceState::Left));
        }

        // Closed and made again under its id, at the same moment: a new
        // room, which never saw these visitors or this address.
        h.store.close_room(&room).await.unwrap();
        h.room("r", 1, None).await;
        for gone in [leaver, holder] {
            assert!(
                matches!(h.state(&room, gone).await, PlaceState::Expired),
                "nothing of the predecessor's departures is told"
            );
        }
        h.patch(&room, r#"{"paused": true}"#).await;
        h.store
            .join_with(&room, VisitorId::random(), &budget)
            .await
            .expect("the address's budget is the new room's own");
    }

    pub async fn those_who_left_are_told_so_then_forgotten(h: &Harness) {
        let room = h.room("r", 1, None).await;
        h.patch(&room, r#"{"abandon_after_s": 20, "pass_ttl_s": 60}"#)
            .await;
        let (holder, state) = h.join(&room).await;
        assert!(is_admitted(state));
        h.patch(&room, r#"{"paused": true}"#).await;
        let (ahead, _) = h.join(&room).await;
        let (leaver, _) = h.join(&room).await;
        let alice = VisitorId::random();
        h.store
            .join_with(&room, alice, &as_user("alice"))
            .await
            .unwrap();
        h.store.leave(&room, leaver).await.unwrap();
        h.store.leave(&room, holder).await.unwrap();
        h.store.leave(&room, alice).await.unwrap();
        assert_eq!(h.store.user_of(&room, alice).await.unwrap(), None);
        for gone in [leaver, holder, alice] {
            assert!(matches!(h.state(&room, gone).await, PlaceState::Left));
        }

        h.clock.advance_ms(19_999);
        h.store.touch(&room, &[ahead]).await.unwrap();
        assert!(matches!(h.state(&room, leaver).await, PlaceState::Left));
        h.clock.advance_ms(1);
        h.store.tick(&room).await.unwrap();
        assert!(
            matches!(h.state(&room, leaver).await, PlaceState::Expired),
            "forgotten after abandon_after_s"
        );
        assert!(
            matches!(h.state(&room, holder).await, PlaceState::Left),
            "a pass given up: told so while it would have run"
        );
        assert_eq!(
            position(h.store.join(&room, leaver).await.unwrap().state),
            2,
            "back, at the back of the line"
        );
        let again = h
            .store
            .join_with(&room, VisitorId::random(), &as_user("alice"))
            .await
            .unwrap();
        assert_ne!(again.visitor, alice, "alice's place went with her");
        assert_eq!(position(again.state), 3);

        h.clock.advance_ms(40_000); // 60 s after admission
        h.store
            .touch(&room, &[ahead, leaver, again.visitor])
            .await
            .unwrap();
        assert!(matches!(h.state(&room, holder).await, PlaceState::Expired));
        assert!(matches!(
            h.store
                .revoke_pass(&room, holder, None, PassTakenBack::Revoked)
                .await,
            Ok(false)
        ));
        assert_eq!(
            position(h.store.join(&room, holder).await.unwrap().state),
            4
        );
    }

    pub async fn a_known_user_holds_one_place_from_any_device(h: &Harness) {
        let room = h.room("r", 1, None).await;
        h.patch(&room, r#"{"paused": true}"#).await;
        let phone = VisitorId::random();
        let first = h
            .store
            .join_with(&room, phone, &as_user("alice"))
            .await
            .unwrap();
        let laptop = VisitorId::random();
        let again = h
            .store
            .join_with(&room, laptop, &as_user("alice"))
            .await
            .unwrap();
        assert_eq!(
            again.visitor, phone,
            "the second device gets the first one's place"
        );
        assert_eq!(position(again.state), 1);
        let bob = h
            .store
            .join_with(&room, VisitorId::random(), &as_user("bob"))
            .await
            .unwrap();
        assert_eq!(position(bob.state), 2);
        let anonymous = h.join(&room).await;
        assert_eq!(position(anonymous.1), 3, "anonymous joins still welcome");
        assert_eq!(h.store.room(&room).await.unwrap().stats.waiting, 3);
        assert_eq!(first.visitor, phone);

        h.store.leave(&room, phone).await.unwrap();
        let back = h
            .store
            .join_with(&room, laptop, &as_user("alice"))
            .await
            .unwrap();
        assert_eq!(
            back.visitor, laptop,
            "a place given up is not held any more"
        );
        assert_eq!(position(back.state), 3, "…so the user goes to the back");
    }

    /// A join whose visitor was made for it (`fresh`, no ticket) is
    /// answered as the same join unmarked, whatever the room asks of new
    /// places: a store may skip looking for a fresh visitor's place, never
    /// answer otherwise. Nor when a known user's place answers for them.
    pub async fn a_fresh_visitor_is_answered_as_any_new_one(h: &Harness) {
        use waitroom::words::clock::Clock;
        let opens_at = waitroom::words::clock::rfc3339(h.clock.now_ms() + 60_000);
        let setups = [
            "{}".to_string(),
            r#"{"paused": true}"#.into(),
            r#"{"queue_method": "reject"}"#.into(),
            r#"{"queue_method": "passthrough", "paused": true}"#.into(),
            r#"{"pow_difficulty": 3, "paused": true}"#.into(),
            r#"{"code_required": true}"#.into(),
            r#"{"bypass_networks": ["10.0.0.0/8"], "paused": true, "queue_method": "reject"}"#
                .into(),
            format!(r#"{{"opens_at": "{opens_at}"}}"#),
        ];
        for (i, setup) in setups.iter().enumerate() {
            let mut answers = Vec::new();
            for fresh in [false, true] {
                let room = h.room(&format!("r{i}-{fresh}"), 1, Some(2)).await;
                h.patch(&room, setup).await;
                let mut said = Vec::new();
                for address in [None, Some("10.1.2.3"), Some("192.0.2.1"), None] {
                    let options = JoinOptions {
                        address: address.map(|a| a.parse().unwrap()),
                        fresh,
                        ..JoinOptions::default()
                    };
                    let answer = h
                        .store
                        .join_with(&room, VisitorId::random(), &options)
                        .await;
                    said.push(match answer {
                        Ok(place) => {
                            let state = match place.state {
                                PlaceState::PreQueue { .. } => "pre-queue".to_string(),
                                state => format!("{state:?}"),
                            };
                            format!("{state} {} {}", place.line.waiting, place.line.version)
                        }
                        Err(error) => format!("{error:?}").replace(room.as_str(), "the room"),
                    });
                }
                answers.push(said);
            }
            assert_eq!(answers[0], answers[1], "{setup}");
        }
        // A known user's place answers for a fresh visitor: theirs is read.
        let room = h.room("u", 1, None).await;
        h.patch(&room, r#"{"paused": true}"#).await;
        let as_alice = JoinOptions {
            fresh: true,
            ..as_user("alice")
        };
        let phone = VisitorId::random();
        h.store.join_with(&room, phone, &as_alice).await.unwrap();
        h.join(&room).await;
        let laptop = h
            .store
            .join_with(&room, VisitorId::random(), &as_alice)
            .await
            .unwrap();
        assert_eq!(laptop.visitor, phone, "the phone's place");
        assert_eq!(position(laptop.state), 1);
        assert_eq!(h.store.room(&room).await.unwrap().stats.waiting, 2);
    }

    pub async fn user_required_refuses_anonymous_joins(h: &Harness) {
        let room = h.room("r", 1, None).await;
        h.patch(
            &room,
            r#"{"user_key": "a-user-key-of-thirty-two-characters!", "user_required": true}"#,
        )
        .await;
        assert!(matches!(
            h.store.join(&room, VisitorId::random()).await,
            Err(StoreError::UserRequired)
        ));
        assert!(
            h.store
                .join_with(&room, VisitorId::random(), &as_user("carol"))
                .await
                .is_ok()
        );
        let info = h.store.room(&room).await.unwrap();
        assert!(info.user_key_set && info.config.user_required);
        assert_eq!(
            info.config.user_key.as_ref().map(|k| k.expose()),
            Some("a-user-key-of-thirty-two-characters!"),
            "the store keeps the key (the API never shows it)"
        );
    }

    pub async fn proof_of_work_is_asked_of_new_places_and_each_solution_counts_once(h: &Harness) {
        let room = h.room("r", 1, None).await;
        h.patch(&room, r#"{"pow_difficulty": 1, "paused": true}"#)
            .await;
        let solved = |id: &str| JoinOptions {
            pow: Some(Solved {
                id: id.into(),
                until: waitroom::words::clock::Clock::now_ms(&h.clock) + 60_000,
                difficulty: 1,
            }),
            ..JoinOptions::default()
        };
        assert!(matches!(
            h.store.join(&room, VisitorId::random()).await,
            Err(StoreError::PowRequired)
        ));
        let first = VisitorId::random();
        h.store
            .join_with(&room, first, &solved("s1"))
            .await
            .unwrap();
        assert!(matches!(
            h.store
                .join_with(&room, VisitorId::random(), &solved("s1"))
                .await,
            Err(StoreError::PowReused)
        ));
        assert!(
            h.store.join(&room, first).await.is_ok(),
            "a place already held needs no new proof"
        );
        h.store
            .join_with(&room, VisitorId::random(), &solved("s2"))
            .await
            .unwrap();
        let stats = h.store.room(&room).await.unwrap().stats;
        assert_eq!((stats.waiting, stats.turned_away), (2, 2));
    }

    pub async fn a_solution_easier_than_the_room_asks_now_is_refused(h: &Harness) {
        let room = h.room("r", 1, None).await;
        h.patch(&room, r#"{"pow_difficulty": 3, "paused": true}"#)
            .await;
        let solved = |id: &str, difficulty: u32| JoinOptions {
            pow: Some(Solved {
                id: id.into(),
                until: waitroom::words::clock::Clock::now_ms(&h.clock) + 60_000,
                difficulty,
            }),
            ..JoinOptions::default()
        };
        // Made at 2, before the room asked for 3.
        assert!(matches!(
            h.store
                .join_with(&room, VisitorId::random(), &solved("easy", 2))
                .await,
            Err(StoreError::PowTooEasy)
        ));
        for (id, difficulty) in [("fair", 3), ("hard", 5)] {
            h.store
                .join_with(&room, VisitorId::random(), &solved(id, difficulty))
                .await
                .unwrap();
        }
        // The refused solution was not spent: enough once the room asks less.
        h.patch(&room, r#"{"pow_difficulty": 2}"#).await;
        h.store
            .join_with(&room, VisitorId::random(), &solved("easy", 2))
            .await
            .unwrap();
        let stats = h.store.room(&room).await.unwrap().stats;
        assert_eq!((stats.waiting, stats.turned_away), (3, 1));
    }

    fn from_address(address: &str) -> JoinOptions {
        JoinOptions {
            address: Some(address.parse().unwrap()),
            ..JoinOptions::default()
        }
    }

    /// api.md, "Bypass networks": admitted at once whatever the bucket, the
    /// cap, `paused`, the method or proof of work; outside `active`.
    pub async fn bypass_networks_are_let_in_at_once_outside_the_cap(h: &Harness) {
        let room = h.room("r", 1, Some(1)).await;
        let (_, first) = h.join(&room).await;
        assert!(is_admitted(first), "the one pass the cap allows");
        // Prefixes that end inside a hex digit (/13, /30) as well as on one.
        h.patch(
            &room,
            r#"{"bypass_networks": ["10.16.0.0/13", "2001:db8::/30", "192.0.2.7", "198.51.100.0/24"],
                "paused": true, "pow_difficulty": 3, "queue_method": "reject"}"#,
        )
        .await;
        let mut staff = Vec::new();
        for address in [
            "10.23.255.254",
            "10.16.0.1",
            "2001:dbb:ffff::1",
            "::ffff:192.0.2.7",
            "198.51.100.200",
        ] {
            let visitor = VisitorId::random();
            let place = h
                .store
                .join_with(&room, visitor, &from_address(address))
                .await
                .unwrap();
            assert!(is_admitted(place.state), "{address}: {:?}", place.state);
            staff.push(visitor);
        }
        for address in [
            "10.24.0.1",
            "10.15.255.255",
            "2001:dbc::1",
            "192.0.2.8",
            "198.51.101.1",
        ] {
            assert!(
                matches!(
                    h.store
                        .join_with(&room, VisitorId::random(), &from_address(address))
                        .await,
                    Err(StoreError::NotAccepting)
                ),
                "{address} is no bypass: the room turns arrivals away"
            );
        }
        let again = h
            .store
            .join_with(&room, staff[0], &from_address("10.23.255.254"))
            .await
            .unwrap();
        assert!(is_admitted(again.state), "a second join keeps the pass");
        let stats = h.store.room(&room).await.unwrap().stats;
        assert_eq!(
            (
                stats.active,
                stats.bypassed,
                stats.bypassed_active,
                stats.admitted_total
            ),
            (1, 5, 5, 1),
            "outside the cap and the line's admissions"
        );
        assert_eq!(stats.turned_away, 5);

        // Their passes run out as any pass does; the count stays.
        let ttl = h.store.room(&room).await.unwrap().config.pass_ttl_s;
        h.clock.advance_ms(ttl * 1000);
        assert_eq!(h.state(&room, staff[1]).await, PlaceState::Expired);
        let stats = h.store.room(&room).await.unwrap().stats;
        assert_eq!(
            (stats.active, stats.bypassed, stats.bypassed_active),
            (0, 5, 0)
        );

        // Before an opening too: straight in, not into the pre-queue.
        let opens_at = waitroom::words::clock::rfc3339(
            waitroom::words::clock::Clock::now_ms(&h.clock) + 3_600_000,
        );
        h.patch(
            &room,
            &format!(
                r#"{{"opens_at": "{opens_at}", "queue_method": "fifo", "pow_difficulty": 0}}"#
            ),
        )
        .await;
        let early = h
            .store
            .join_with(&room, VisitorId::random(), &from_address("198.51.100.1"))
            .await
            .unwrap();
        assert!(is_admitted(early.state), "{:?}", early.state);
        let (_, other) = h.join(&room).await;
        assert!(matches!(other, PlaceState::PreQueue { .. }), "{other:?}");

        // An invite-only room asks no code of them.
        h.patch(&room, r#"{"code_required": true}"#).await;
        let invited = h
            .store
            .join_with(&room, VisitorId::random(), &from_address("198.51.100.2"))
            .await
            .unwrap();
        assert!(is_admitted(invited.state), "{:?}", invited.state);
        h.patch(&room, r#"{"code_required": false}"#).await;

        // Taken off the list: by the next join.
        h.patch(&room, r#"{"bypass_networks": []}"#).await;
        let later = h
            .store
            .join_with(&room, VisitorId::random(), &from_address("198.51.100.1"))
            .await
            .unwrap();
        assert!(
            matches!(later.state, PlaceState::PreQueue { .. }),
            "{:?}",
            later.state
        );
    }

    /// Not after `closes_at`, and `user_required` still applies.
    pub async fn bypass_networks_wait_for_nothing_but_closes_at(h: &Harness) {
        let room = h.room("r", 1, None).await;
        let closes_at = waitroom::words::clock::rfc3339(
            waitroom::words::clock::Clock::now_ms(&h.clock) + 10_000,
        );
        h.patch(
            &room,
            &format!(r#"{{"bypass_networks": ["10.0.0.0/8"], "closes_at": "{closes_at}"}}"#),
        )
        .await;
        h.patch(
            &room,
            r#"{"user_key": "a-user-key-of-thirty-two-characters!", "user_required": true}"#,
        )
        .await;
        assert!(matches!(
            h.store
                .join_with(&room, VisitorId::random(), &from_address("10.1.2.3"))
                .await,
            Err(StoreError::UserRequired)
        ));
        let staff = JoinOptions {
            user: Some("staff-1".into()),
            ..from_address("10.1.2.3")
        };
        let place = h
            .store
            .join_with(&room, VisitorId::random(), &staff)
            .await
            .unwrap();
        assert!(is_admitted(place.state));
        h.clock.advance_ms(10_000);
        let staff = JoinOptions {
            user: Some("staff-2".into()),
            ..from_address("10.1.2.3")
        };
        assert!(matches!(
            h.store.join_with(&room, VisitorId::random(), &staff).await,
            Err(StoreError::NotAccepting)
        ));
        let stats = h.store.room(&room).await.unwrap().stats;
        assert_eq!((stats.bypassed, stats.turned_away), (1, 1));
    }

    pub async fn unknown_rooms_are_errors(h: &Harness) {
        let room = RoomId::parse("nowhere").unwrap();
        assert!(matches!(
            h.store.join(&room, VisitorId::random()).await,
            Err(StoreError::RoomNotFound(_))
        ));
        assert!(matches!(
            h.store.tick(&room).await,
            Err(StoreError::RoomNotFound(_))
        ));
        let exists = h.room("r", 1, None).await;
        assert!(matches!(
            h.store
                .create_room(exists, RoomConfig::new("again", "/x"))
                .await,
            Err(StoreError::RoomExists(_))
        ));
    }
}
