-- The terms of the messages' index with the count of messages holding each
-- (https://sqlite.org/fts5.html#the_fts5vocab_virtual_table_module): the inbox's search
-- reads how common its words are here before it chooses how to find them. It stores
-- nothing of its own.
CREATE VIRTUAL TABLE messages_fts_terms USING fts5vocab(messages_fts, 'row');
