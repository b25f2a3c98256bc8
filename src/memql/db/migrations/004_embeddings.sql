-- Moving memories to another embedding model without stopping writes: `memql reembed` fills the
-- shadow column batch by batch (each batch commits, so a killed run resumes where it stopped),
-- then swaps every row to the new model and records the new space in one short transaction.
-- Until the swap, recall keeps using `embedding` and sees every memory.
alter table memories
    add column next_embedding vector,
    add column next_embedding_model text,
    add check ((next_embedding is null) = (next_embedding_model is null));
