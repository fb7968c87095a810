"""Every size and range limit of the product, in one place.

Serializers, forms, filters, models, commands and services import these; nothing retypes
a number. Database column sizes are limits too: a model's max_length names one of these.
"""

from datetime import timedelta

# --- the breakpoint's own fields ---------------------------------------------------
BREAKPOINT_ID_LENGTH = 40  # Breakpoint.id (bp_ + random); longer ids are never queried
MAX_AGENT_ID_LENGTH = 128
MAX_RUN_ID_LENGTH = 128
MAX_TITLE_LENGTH = 500
MAX_KEY_LENGTH = 255
MIN_TTL_SECONDS = 1
MAX_TTL_SECONDS = 365 * 24 * 60 * 60
MAX_IDEMPOTENCY_KEY_LENGTH = 255

# --- payload (babysitter's ctx.breakpoint() argument) --------------------------------
MAX_TAGS = 50
MAX_TAG_LENGTH = 100
MAX_FILES = 100
MAX_PATH_LENGTH = 1000
MAX_LANGUAGE_LENGTH = 50
# A file's text may use most of the request body (BPM_MAX_BODY_BYTES, 5 MiB by default).
MAX_CONTENT_LENGTH = 5_000_000
# A question is read by a human on the review page: ~10 printed pages is already too long.
MAX_QUESTION_LENGTH = 20_000
MAX_PREVIOUS_FEEDBACK_LENGTH = 10_000
MAX_EXPERTS = 20
# Expert names are group names or usernames, both at most 150 characters in Django.
MAX_EXPERT_NAME_LENGTH = 150
# requestedBy (and an agent token's owner): a username or an email address.
MAX_REQUESTED_BY_LENGTH = 254
MAX_OPTIONS = 20
MAX_OPTION_LENGTH = 200
MAX_NESTING = 100
# Free-form keys are stored, echoed and rendered whole; a human-sized request holds far
# fewer values than this (1.7 million numbers fit in 5 MiB and took ~0.9 s to store).
MAX_PAYLOAD_VALUES = 100_000
# autoApproveAfterN: -1 (none) or 1..MAX consecutive approvals; MAX is also a query LIMIT.
NO_AUTO_APPROVE_THRESHOLD = -1
MIN_AUTO_APPROVE_AFTER_N = 1
MAX_AUTO_APPROVE_AFTER_N = 1_000

# A form the agent declares (payload.form, a JSON Schema) and the values answering it
# (payload.proposal, a release's values): small, shallow, and cheap to check, so one
# agent's schema cannot slow the service for the others (breakpoints.payload.form_schema).
MAX_FORM_BYTES = 64 * 1024  # the schema as compact JSON
MAX_FORM_DEPTH = 32
MAX_VALUES_BYTES = 64 * 1024  # a proposal, or a release's values, as compact JSON
MAX_VALUES_DEPTH = 16
MAX_VALUES_COUNT = 1_000  # values in all (uniqueItems compares items pairwise)
MAX_FORM_PATTERN_LENGTH = 200
# A pattern is matched by RE2 (linear time) only against texts this long (a longer text
# fails the field): a match's cost stays small and predictable.
MAX_PATTERN_SUBJECT_LENGTH = 1_000
MAX_FORM_PROBLEMS = 50  # problems reported in one answer
# Schemas a form may apply along one path of an answer MAX_VALUES_DEPTH deep, counted when
# it is declared ($ref, allOf, anyOf, oneOf multiply: breakpoints.payload.form_expansion); each
# check also spends a budget (BPM_FORM_VALIDATION_STEPS, BPM_FORM_VALIDATION_SECONDS).
MAX_FORM_EXPANSION = 10_000

# Nudges while a breakpoint waits (payload.remindEverySeconds): never more often than
# this, never more of them than this.
MIN_REMIND_EVERY_SECONDS = 300
MAX_REMINDERS = 10

# --- what reviewers and admins write ------------------------------------------------
MAX_COMMENT_LENGTH = 20_000
# The option a release names: a label of payload.options, or free text when there are none.
MAX_RELEASE_OPTION_LENGTH = 500
MAX_REASON_LENGTH = 2000  # cancel and expire
# Decisions in one batch (POST /api/breakpoints/decisions, the console's queue), and
# the groups the queue's grouping lists.
MAX_BATCH_DECISIONS = 100
MAX_QUEUE_GROUPS = 100
MAX_RULE_NOTE_LENGTH = 2000
MAX_PATTERN_LENGTH = 500  # an auto-approval rule's pattern, in canonical form
MAX_SEARCH_LENGTH = 200
MAX_TOKEN_NAME_LENGTH = 200
MAX_WEBHOOK_URL_LENGTH = 2000
MAX_WEBHOOK_SECRET_LENGTH = 200
MAX_GROUP_NAME_LENGTH = 150  # Django's auth.Group.name
MAX_ROUTE_NAME_LENGTH = 100
MAX_ROUTE_CHANNELS = 20
MAX_EMAIL_RECIPIENTS = 50
MAX_EMAIL_LENGTH = 254  # an address (RFC 5321's path limit, less the brackets)
MAX_CHANNEL_FIELD_LENGTH = 200  # a Slack channel id, a JIRA project key, an address

# --- external events (triggers app) ---------------------------------------------------
MAX_SOURCE_NAME_LENGTH = 64  # event sources and trigger rules: slugs, in URLs
MAX_EVENT_TYPE_LENGTH = 100
MAX_DELIVERY_ID_LENGTH = 200
MAX_CONDITIONS = 20
MAX_EXPRESSION_LENGTH = 1000  # a JMESPath condition or a template
# A JMESPath expression's shape, checked when a rule is saved (and again when it runs).
MAX_EXPRESSION_DEPTH = 32  # levels of its parse tree
MAX_EXPRESSION_FANOUT = 16  # projections, filters, flattens and multi-selects
MAX_FUNCTION_NESTING = 8  # function calls inside function calls
# The work one expression may do on one event is a setting (BPM_TRIGGER_EXPRESSION_STEPS):
# a step per node visited, per value built, compared or turned into text.
MAX_SELECTED_BREAKPOINTS = 100  # a release or cancel acts on at most this many
EVENT_TOLERANCE_SECONDS = 5 * 60  # signed timestamps older or newer than this are refused

# PostgreSQL's timestamptz takes UTC offsets up to 15:59 either way.
MAX_UTC_OFFSET = timedelta(hours=15, minutes=59)
