"""The retrieval half of the RAG pipeline: index, hybrid retrieval, graph expansion, reranking, dynamic K."""
