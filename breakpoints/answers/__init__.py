"""How a breakpoint is answered and how it ended: the answer form a person fills in
(answer_form), the votes of its seats (voting), the result the agent receives (results),
and the outcome every channel shows (outcome)."""
