"""Which test covers which case of the fault-injection checklist (reliability reference, section 2; 42 cases).

The table below is the map; the tests here keep it honest: every case is listed, every test named exists (a renamed
or deleted test fails here), and the cases no test covers yet are named with what is missing, so the gap is visible
in CI instead of in a document.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# case -> (what it is, the tests that cover it as "file::test", or an empty tuple and why not yet)
CHECKLIST: dict[int, tuple[str, tuple[str, ...], str]] = {
    1: (
        "partial line at EOF, rest later",
        (
            "test_tail.py::test_partial_line_then_completion",
            "test_daemon.py::test_partial_line_then_completion",
        ),
        "",
    ),
    2: (
        "partial line, then crash",
        ("test_daemon.py::test_partial_line_then_sigkill_reads_the_line_once_whole",),
        "",
    ),
    3: (
        "last line never gets its newline",
        (
            "test_tail.py::test_read_unterminated_does_not_consume",
            "test_daemon.py::test_last_line_without_newline_in_an_idle_legacy_log",
        ),
        "",
    ),
    4: (
        "truncate while running",
        (
            "test_tail.py::test_truncation_while_open_restarts_at_zero",
            "test_daemon.py::test_truncation_while_running_and_while_stopped",
        ),
        "",
    ),
    5: (
        "truncate while stopped, regrown",
        (
            "test_tail.py::test_truncated_and_regrown_while_stopped_is_read_from_zero",
            "test_daemon.py::test_truncation_while_running_and_while_stopped",
        ),
        "",
    ),
    6: ("copytruncate rotation", ("test_tail.py::test_truncation_while_open_restarts_at_zero",), ""),
    7: (
        "replaced under the same name",
        (
            "test_tail.py::test_replacement_drains_old_file_first",
            "test_daemon.py::test_file_replaced_under_the_same_name",
        ),
        "",
    ),
    8: ("inode reuse", ("test_tail.py::test_replaced_while_closed_reads_new_file_from_zero",), ""),
    9: (
        "deleted while open with unread data",
        (
            "test_tail.py::test_deletion_while_open_drains_then_reports_deleted",
            "test_daemon.py::test_deleted_while_open_is_drained_then_forgotten",
        ),
        "",
    ),
    10: (
        "deleted while the daemon is stopped",
        (
            "test_checklist_faults.py::test_a_log_deleted_while_the_daemon_is_stopped_is_forgotten_not_an_error",
        ),
        "",
    ),
    11: (
        "dir created and file written within 1 ms",
        (
            "test_discover.py::test_new_session_dir_and_file_within_1ms_found",
            "test_daemon.py::test_session_folder_created_and_written_within_a_millisecond",
        ),
        "",
    ),
    12: (
        "inotify overflow",
        ("test_discover_inotify.py::test_overflow_mends_the_watches_and_rescans_once",),
        "",
    ),
    13: (
        "max_user_watches exhausted",
        (
            "test_resource_limits.py::test_exhausted_inotify_watches_are_said_once_shown_and_polled",
            "test_discover.py::test_observer_failure_falls_back_to_polling_with_one_warning",
        ),
        "",
    ),
    14: (
        "descriptor exhaustion",
        (
            "test_resource_limits.py::test_500_sessions_under_a_small_descriptor_limit_are_all_delivered_without_a_warning_storm",
            "test_daemon.py::test_two_thousand_session_folders",
        ),
        "",
    ),
    15: (
        "10k idle sessions, 10 active",
        (
            "test_discover.py::test_scan_2000_session_dirs",
            "test_state.py::test_5000_checkpoints_load_and_flush_timing",
        ),
        "",
    ),
    16: (
        "collector down for long",
        (
            "test_backlog_cpu.py::test_cpu_stays_low_at_the_backlog_cap_with_the_collector_down",
            "test_daemon.py::test_collector_trouble_delivers_everything_after_recovery",
        ),
        "",
    ),
    17: (
        "429 with Retry-After",
        ("test_daemon.py::test_collector_trouble_delivers_everything_after_recovery",),
        "",
    ),
    18: (
        "503 / UNAVAILABLE on a share of requests",
        (
            "test_replay.py::test_collector_answering_503_still_gets_everything",
            "test_daemon.py::test_collector_trouble_delivers_everything_after_recovery",
        ),
        "",
    ),
    19: (
        "timeout after the server accepted",
        (
            "test_delivery.py::test_a_collector_answering_after_12s_is_acknowledged_on_the_first_try",
            "test_delivery.py::test_per_signal_timeouts_win_over_the_general_one",
        ),
        "",
    ),
    20: (
        "permanent rejection",
        (
            "test_daemon.py::test_permanent_rejection_is_dead_lettered_and_the_rest_delivered",
            "test_replay.py::test_permanent_rejection_is_dead_lettered_and_reported",
            "test_dead_letters.py::test_dead_letters_from_the_daemon_are_resent_exactly_once",
        ),
        "",
    ),
    21: (
        "SIGKILL between export and checkpoint",
        ("test_daemon.py::test_sigkill_between_export_and_checkpoint_replays_identical_spans",),
        "",
    ),
    22: (
        "SIGKILL during the checkpoint write",
        (
            "test_state_sqlite.py::test_sigkill_at_any_step_of_a_flush_leaves_the_old_or_the_new_rows",
            "test_daemon.py::test_torn_state_file_falls_back_without_loss",
        ),
        "",
    ),
    23: (
        "power loss",
        (
            "test_state_sqlite.py::test_sigkill_at_any_step_of_a_flush_leaves_the_old_or_the_new_rows",
            "test_state.py::test_a_db_that_is_not_a_database_is_set_aside",
        ),
        "",
    ),
    24: (
        "ENOSPC on the state write",
        (
            "test_state.py::test_failed_flush_keeps_state_and_is_retried",
            "test_state.py::test_startup_flush_failure_is_a_state_error",
        ),
        "",
    ),
    25: (
        "state dir read-only or deleted",
        (
            "test_daemon.py::test_unwritable_state_dir_is_a_clear_error",
            "test_state_dir_deleted.py::test_a_deleted_state_dir_is_recreated_relocked_and_saved",
            "test_state_dir_deleted.py::test_a_daemon_whose_deleted_state_dir_was_taken_over_stops_without_writing_there",
        ),
        "",
    ),
    26: (
        "clock skew, end before start",
        ("test_checklist_faults.py::test_a_tool_that_ends_before_it_starts_is_clamped_and_counted",),
        "",
    ),
    27: (
        "50 MB single line",
        (
            "test_tail.py::test_20mb_line_is_skipped_with_bounded_memory",
            "test_daemon.py::test_bad_input_in_the_middle_of_a_session",
        ),
        "",
    ),
    28: (
        "invalid UTF-8",
        (
            "test_tail.py::test_invalid_utf8_passes_through_unchanged",
            "test_daemon.py::test_bad_input_in_the_middle_of_a_session",
            "test_one_path.py::test_bad_lines_cost_only_themselves",
        ),
        "",
    ),
    29: (
        "non-JSON, non-object, missing fields",
        (
            "test_daemon.py::test_bad_input_in_the_middle_of_a_session",
            "test_replay.py::test_a_bad_line_costs_that_line_only",
        ),
        "",
    ),
    30: (
        "nesting beyond 1024, integers beyond 2^64",
        ("test_delivery.py::test_replay_poison_values_cost_only_themselves",),
        "",
    ),
    31: ("NUL-filled region", ("test_tail.py::test_invalid_utf8_passes_through_unchanged",), ""),
    32: (
        "session never ends",
        ("test_platform.py::test_daemon_closes_a_prompt_whose_cli_pid_was_recycled",),
        "",
    ),
    33: (
        "restart with a changed config",
        ("test_checklist_faults.py::test_a_restart_with_other_settings_resumes_every_known_log",),
        "",
    ),
    34: (
        "two daemons on one state dir",
        (
            "test_daemon.py::test_second_daemon_on_the_same_state_dir_refuses",
            "test_state.py::test_lock_held_by_another_process",
        ),
        "",
    ),
    35: (
        "SIGTERM with a backlog",
        (
            "test_daemon.py::test_sigterm_with_a_backlog_flushes_and_saves_state",
            "test_delivery.py::test_shutdown_with_the_collector_down_keeps_its_deadline_and_counts_what_waits",
        ),
        "",
    ),
    36: (
        "1 GB backfill at first start",
        ("test_daemon.py::test_live_session_is_not_delayed_by_a_large_backfill",),
        "",
    ),
    37: (
        "file shorter than the fingerprint",
        (
            "test_tail.py::test_short_file_has_growing_fingerprint",
            "test_tail.py::test_empty_file_then_growing",
        ),
        "",
    ),
    38: (
        "two sessions with identical first bytes",
        ("test_tail.py::test_identical_first_bytes_in_two_session_dirs_are_distinct",),
        "",
    ),
    39: (
        "file moved into the tree",
        (
            "test_checklist_faults.py::test_a_log_moved_back_into_the_tree_resumes_and_an_unknown_one_is_read_from_zero",
        ),
        "",
    ),
    40: (
        "$HOME on NFS (no inotify)",
        (
            "test_discover.py::test_forced_polling_reports_new_changed_and_deleted",
            "test_discover.py::test_observer_failure_falls_back_to_polling_with_one_warning",
        ),
        "",
    ),
    41: (
        "fork with a live batch processor",
        ("test_replay.py::test_worker_processes_export_exactly_what_one_process_does",),
        "",
    ),
    42: (
        "exporter raises instead of failing",
        (
            "test_checklist_faults.py::test_a_transport_that_raises_is_not_acked_and_the_batch_is_delivered_once",
        ),
        "",
    ),
}


def test_every_case_of_the_checklist_is_listed() -> None:
    assert sorted(CHECKLIST) == list(range(1, 43))


@pytest.mark.parametrize("case", sorted(CHECKLIST))
def test_the_tests_named_for_a_case_exist(case: int) -> None:
    _, tests, missing = CHECKLIST[case]
    assert bool(tests) != bool(missing), "either tests or the reason there are none"
    for ref in tests:
        file, name = ref.split("::")
        source = (TESTS / file).read_text()
        assert re.search(rf"^def {re.escape(name)}\(", source, re.MULTILINE), f"{ref} does not exist"


def test_the_open_cases_are_few() -> None:
    open_cases = [case for case, (_, tests, _) in CHECKLIST.items() if not tests]
    assert open_cases == [], f"checklist cases with no test: {open_cases}"
