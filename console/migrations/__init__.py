"""The console's migrations (app label "reviews"), kept although its one model, Feedback,
moved to breakpoints (breakpoints/migrations/0015, 0005 here): 0001 creates the
reviews_feedback table Feedback still uses, breakpoints' 0015 depends on 0004, and every
existing database has them applied. Removing them would break a fresh migrate and the
migration history of existing databases alike."""
